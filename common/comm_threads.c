/* Thread communicators: N ranks as N threads of one process (common/comm.h).
 * all-reduce: reduce-scatter then all-gather, in place. Each rank publishes its buffer; rank r
 * sums chunk r over ranks 0..N-1 in that order (the same float operations for every element
 * whatever N's chunking, so every rank ends with bitwise the same values) and writes it into
 * its own buffer; then every rank copies the other chunks from their owners. Three barriers.
 * The barrier is a mutex + condition with a generation count and an abort flag, so a rank
 * that failed wakes the others with an error instead of leaving them blocked. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/comm.h"

#define NAME "threads"

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int size;            /* ranks */
  int waiting;         /* ranks arrived at the current barrier */
  unsigned long gen;   /* barrier generation */
  int aborted;         /* set by abort(): barriers fail until recover() */
  void **ptr;          /* [size] buffers published for the current collective */
  const void **cptr;   /* [size] send buffers (allgather) */
  int64_t *count;      /* [size] counts published */
  int *dtype;          /* [size] dtypes published */
  vcomm *comms;        /* [size] the rank communicators */
} tgroup;

/* 0 when every rank arrived; -1 when the group was aborted. */
static int barrier(tgroup *g) {
  pthread_mutex_lock(&g->mu);
  if (g->aborted) {
    pthread_mutex_unlock(&g->mu);
    return -1;
  }
  unsigned long my = g->gen;
  if (++g->waiting == g->size) {
    g->waiting = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv);
  } else {
    while (g->gen == my && !g->aborted) pthread_cond_wait(&g->cv, &g->mu);
  }
  int rc = g->gen == my ? -1 : 0; /* woken by abort before the barrier completed */
  pthread_mutex_unlock(&g->mu);
  return rc;
}

static vstatus aborted(const vcomm *c, const char *what) {
  return VERR("comm %s: rank %d of %d: %s aborted (another rank failed)", NAME, c->rank, c->size, what);
}

static vstatus check_dtype(const vcomm *c, vdtype dt, const char *what) {
  if (dt == DT_F32 || dt == DT_I32 || dt == DT_BF16) return V_OK;
  return VERR("comm %s: %s: dtype %s is not supported (F32, I32, BF16)", NAME, what, vdtype_name(dt));
}

/* Every rank checks that all published the same count and dtype (all reach the same verdict). */
static vstatus check_agree(const vcomm *c, tgroup *g, const char *what) {
  for (int r = 0; r < g->size; r++)
    if (g->count[r] != g->count[c->rank] || g->dtype[r] != g->dtype[c->rank])
      return VERR("comm %s: %s: rank %d passed %lld elements of %s, rank %d passed %lld of %s", NAME, what, r,
                  (long long)g->count[r], vdtype_name((vdtype)g->dtype[r]), c->rank, (long long)g->count[c->rank],
                  vdtype_name((vdtype)g->dtype[c->rank]));
  return V_OK;
}

/* dst[i] = sum over ranks r = 0..N-1, in that order, of src[r][off + i], i < n (elements of dt).
 * The same float operations for an element whoever computes it, so every rank gets bitwise the
 * same sums; bf16 accumulates in float32 and rounds once. dst may alias one src at the same
 * offsets (each element is read before it is written). */
static void sum_ranks(void *dst, const void *const *src, int N, int64_t off, int64_t n, vdtype dt) {
  for (int64_t i = 0; i < n; i++) {
    const int64_t k = off + i;
    if (dt == DT_F32) {
      float s = ((const float *)src[0])[k];
      for (int r = 1; r < N; r++) s += ((const float *)src[r])[k];
      ((float *)dst)[i] = s;
    } else if (dt == DT_I32) {
      int64_t s = 0;
      for (int r = 0; r < N; r++) s += ((const int32_t *)src[r])[k];
      ((int32_t *)dst)[i] = (int32_t)s;
    } else {
      float s = bf16_to_f32(((const uint16_t *)src[0])[k]);
      for (int r = 1; r < N; r++) s += bf16_to_f32(((const uint16_t *)src[r])[k]);
      ((uint16_t *)dst)[i] = f32_to_bf16(s);
    }
  }
}

static vstatus t_allreduce(const vcomm *c, void *buf, int64_t count, vdtype dt, void *stream) {
  (void)stream;
  tgroup *g = c->ctx;
  VTRY(check_dtype(c, dt, "allreduce_sum"));
  if (count < 0) return VERR("comm %s: allreduce_sum: count %lld < 0", NAME, (long long)count);
  if (g->size == 1) return V_OK;
  const int me = c->rank, N = g->size;
  g->ptr[me] = buf;
  g->count[me] = count;
  g->dtype[me] = (int)dt;
  if (barrier(g)) return aborted(c, "allreduce_sum");
  VTRY(check_agree(c, g, "allreduce_sum"));
  const int64_t c0 = count * me / N, c1 = count * (me + 1) / N;
  const size_t esz = vdtype_size(dt);
  sum_ranks((char *)buf + (size_t)c0 * esz, (const void *const *)g->ptr, N, c0, c1 - c0, dt);
  if (barrier(g)) return aborted(c, "allreduce_sum");
  for (int r = 0; r < N; r++) {
    if (r == me) continue;
    const int64_t a = count * r / N, b = count * (r + 1) / N;
    memcpy((char *)buf + (size_t)a * esz, (const char *)g->ptr[r] + (size_t)a * esz, (size_t)(b - a) * esz);
  }
  /* nobody may reuse its buffer while others still read their chunk of it */
  if (barrier(g)) return aborted(c, "allreduce_sum");
  return V_OK;
}

static vstatus t_allgather(const vcomm *c, const void *send, void *recv, int64_t n, vdtype dt, void *stream) {
  (void)stream;
  tgroup *g = c->ctx;
  VTRY(check_dtype(c, dt, "allgather"));
  if (n < 0) return VERR("comm %s: allgather: count %lld < 0", NAME, (long long)n);
  const int me = c->rank, N = g->size;
  const size_t esz = vdtype_size(dt);
  if (N == 1) {
    if (recv != send) memmove(recv, send, (size_t)n * esz);
    return V_OK;
  }
  g->cptr[me] = send;
  g->count[me] = n;
  g->dtype[me] = (int)dt;
  if (barrier(g)) return aborted(c, "allgather");
  VTRY(check_agree(c, g, "allgather"));
  for (int r = 0; r < N; r++)
    if ((const char *)recv + (size_t)r * n * esz != g->cptr[r])
      memcpy((char *)recv + (size_t)r * n * esz, g->cptr[r], (size_t)n * esz);
  if (barrier(g)) return aborted(c, "allgather");
  return V_OK;
}

static vstatus t_reduce_scatter(const vcomm *c, const void *send, void *recv, int64_t n, vdtype dt, void *stream) {
  (void)stream;
  tgroup *g = c->ctx;
  VTRY(check_dtype(c, dt, "reduce_scatter_sum"));
  if (n < 0) return VERR("comm %s: reduce_scatter_sum: count %lld < 0", NAME, (long long)n);
  const int me = c->rank, N = g->size;
  /* every rank published send; recv may alias send's own chunk (each element is read before it is
   * written, and only by this rank); the second barrier keeps send alive while others read it */
  g->cptr[me] = send;
  g->count[me] = n;
  g->dtype[me] = (int)dt;
  if (barrier(g)) return aborted(c, "reduce_scatter_sum");
  VTRY(check_agree(c, g, "reduce_scatter_sum"));
  sum_ranks(recv, g->cptr, N, (int64_t)me * n, n, dt); /* rank order, as the all-reduce */
  if (barrier(g)) return aborted(c, "reduce_scatter_sum");
  return V_OK;
}

static const vcomm *g_rank(vcomm_group *gr, int r) {
  tgroup *g = gr->ctx;
  return r >= 0 && r < g->size ? &g->comms[r] : NULL;
}

static void g_abort(vcomm_group *gr) {
  tgroup *g = gr->ctx;
  pthread_mutex_lock(&g->mu);
  g->aborted = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

static vstatus g_recover(vcomm_group *gr) {
  tgroup *g = gr->ctx;
  pthread_mutex_lock(&g->mu);
  g->aborted = 0;
  g->waiting = 0;
  g->gen++;
  pthread_mutex_unlock(&g->mu);
  return V_OK;
}

static void g_destroy(vcomm_group *gr) {
  if (!gr) return;
  tgroup *g = gr->ctx;
  if (g) {
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->ptr);
    free(g->cptr);
    free(g->count);
    free(g->dtype);
    free(g->comms);
    free(g);
  }
  free(gr);
}

vstatus vcomm_threads_group(vcomm_group **out, int size) {
  *out = NULL;
  if (size < 1 || size > 4096) return VERR("comm %s: group size %d out of range 1..4096", NAME, size);
  vcomm_group *gr = vcalloc(1, sizeof *gr, "thread comm group");
  tgroup *g = vcalloc(1, sizeof *g, "thread comm state");
  if (!gr || !g) {
    free(gr);
    free(g);
    return V_ERR;
  }
  gr->name = NAME;
  gr->size = size;
  gr->ctx = g;
  gr->rank = g_rank;
  gr->abort = g_abort;
  gr->recover = g_recover;
  gr->destroy = g_destroy;
  g->size = size;
  g->ptr = vcalloc((size_t)size, sizeof *g->ptr, "thread comm table");
  g->cptr = vcalloc((size_t)size, sizeof *g->cptr, "thread comm table");
  g->count = vcalloc((size_t)size, sizeof *g->count, "thread comm table");
  g->dtype = vcalloc((size_t)size, sizeof *g->dtype, "thread comm table");
  g->comms = vcalloc((size_t)size, sizeof *g->comms, "thread comms");
  if (pthread_mutex_init(&g->mu, NULL) || pthread_cond_init(&g->cv, NULL) || !g->ptr || !g->cptr || !g->count ||
      !g->dtype || !g->comms) {
    free(g->ptr);
    free(g->cptr);
    free(g->count);
    free(g->dtype);
    free(g->comms);
    free(g);
    free(gr);
    return VERR("comm %s: cannot create a group of %d ranks", NAME, size);
  }
  for (int r = 0; r < size; r++)
    g->comms[r] = (vcomm){.name = NAME, .rank = r, .size = size, .ctx = g, .allreduce_sum = t_allreduce,
                          .allgather = t_allgather, .reduce_scatter_sum = t_reduce_scatter};
  *out = gr;
  return V_OK;
}

void vcomm_place_vocab_blocks(float *out, const float *gathered, int R, int vocab, int size) {
  const int blk = (vocab + size - 1) / size;
  for (int r = 0; r < size; r++) {
    const int v0 = r * blk < vocab ? r * blk : vocab;
    const int v1 = v0 + blk < vocab ? v0 + blk : vocab;
    for (int i = 0; i < R; i++)
      memcpy(out + (size_t)i * vocab + v0, gathered + ((size_t)r * R + i) * blk, sizeof(float) * (size_t)(v1 - v0));
  }
}

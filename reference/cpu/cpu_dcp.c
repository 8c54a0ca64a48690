/* Decode context parallelism for cpu-ref (see cpu_dcp.h): the position-interleaved KV cache
 * of one rank, the exchange of the new tokens' q/k/v, the partial attention with its
 * log-sum-exp, and the combine. */
#include "reference/cpu/cpu_dcp.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME "cpu-ref dcp"

struct cpu_dcp {
  const vcomm *comm;     /* this rank's communicator */
  int N, rank;           /* ranks, this rank */
  int L, Hl, H;          /* layers, heads of this rank, heads of all ranks (Hl * N) */
  int nope, rope, qk, vd; /* head dims (qk = nope + rope) */
  int max_seq;           /* slots */
  int cap_max;           /* ceil(max_ctx / N): most positions a slot holds on one rank */
  float scale;           /* softmax scale */
  int nthr;              /* threads for the partial attention */
  size_t kv_limit;       /* bytes the cache may use */
  /* the cache: local index j of slot s holds position j*N + rank */
  float **kc;            /* [max_seq * L] -> [cap[s], H, qk] post-RoPE keys of all heads */
  float **vc;            /* [max_seq * L] -> [cap[s], H, vd] values of all heads */
  int *cap;              /* [max_seq] local positions allocated per slot */
  /* step buffers, grown to the largest T seen */
  int rows;              /* tokens the buffers hold */
  float *send;           /* [T, Hl, qk + nope + vd] this rank's q | k_nope | v */
  float *recv;           /* [N, T, Hl, qk + nope + vd] the gathered ones */
  float *part;           /* [T, H, vd + 1] this rank's partial o | lse per (token, head) */
  float *parts;          /* [N, T, H, vd + 1] the gathered partials */
  float *scores;         /* [nthr, cap_max] attention scratch */
};

static size_t bytes_per_local_pos(const cpu_dcp *d) {
  return (size_t)d->L * (size_t)d->H * (size_t)(d->qk + d->vd) * sizeof(float);
}

void cpu_dcp_close(cpu_dcp *d) {
  if (!d) return;
  for (int i = 0; d->kc && i < d->max_seq * d->L; i++) free(d->kc[i]);
  for (int i = 0; d->vc && i < d->max_seq * d->L; i++) free(d->vc[i]);
  free(d->kc);
  free(d->vc);
  free(d->cap);
  free(d->send);
  free(d->recv);
  free(d->part);
  free(d->parts);
  free(d->scores);
  free(d);
}

vstatus cpu_dcp_open(cpu_dcp **out, const vcomm *comm, const cpu_dcp_dims *dm) {
  *out = NULL;
  if (!comm) return VERR(NAME ": option 'dcp' needs a communicator (open the path with tp >= 1)");
  if (dm->max_seq < 1 || dm->max_ctx < 1 || dm->layers < 1 || dm->local_heads < 1 || dm->vd < 1)
    return VERR(NAME ": open: max_seq %d, max_ctx %d, layers %d, local heads %d, v_head_dim %d must be >= 1",
                dm->max_seq, dm->max_ctx, dm->layers, dm->local_heads, dm->vd);
  cpu_dcp *d = vcalloc(1, sizeof *d, NAME " state");
  if (!d) return V_ERR;
  d->comm = comm;
  d->N = comm->size;
  d->rank = comm->rank;
  d->L = dm->layers;
  d->Hl = dm->local_heads;
  d->H = dm->local_heads * comm->size;
  d->nope = dm->nope;
  d->rope = dm->rope;
  d->qk = dm->nope + dm->rope;
  d->vd = dm->vd;
  d->max_seq = dm->max_seq;
  d->cap_max = (dm->max_ctx + d->N - 1) / d->N;
  d->scale = dm->scale;
  d->nthr = dm->n_threads > 0 ? dm->n_threads : 1;
  d->kv_limit = dm->kv_limit;
  double worst = (double)bytes_per_local_pos(d) * d->max_seq * d->cap_max;
  if (worst > (double)d->kv_limit) {
    vstatus e = VERR(NAME ": KV cache of rank %d for max_seq %d x ceil(max_ctx %d / %d) positions needs %.2f GiB, "
                     "more than the %.2f GiB limit: lower max_seq or max_ctx", d->rank, d->max_seq, dm->max_ctx, d->N,
                     worst / 1073741824.0, (double)d->kv_limit / 1073741824.0);
    cpu_dcp_close(d);
    return e;
  }
  d->kc = vcalloc((size_t)d->max_seq * d->L, sizeof(float *), NAME " key cache table");
  d->vc = vcalloc((size_t)d->max_seq * d->L, sizeof(float *), NAME " value cache table");
  d->cap = vcalloc((size_t)d->max_seq, sizeof(int), NAME " cache capacities");
  d->scores = vcalloc((size_t)d->nthr * (size_t)d->cap_max, sizeof(float), NAME " attention scratch");
  if (!d->kc || !d->vc || !d->cap || !d->scores) {
    cpu_dcp_close(d);
    return V_ERR;
  }
  *out = d;
  return V_OK;
}

vstatus cpu_dcp_reserve(cpu_dcp *d, int s, int n_pos) {
  if (s < 0 || s >= d->max_seq) return VERR(NAME ": slot %d out of range [0, %d)", s, d->max_seq);
  const int need = cpu_dcp_owned(n_pos, d->rank, d->N);
  if (need > d->cap_max)
    return VERR(NAME ": slot %d: %d positions need %d on rank %d, past ceil(max_ctx / %d) = %d", s, n_pos, need,
                d->rank, d->N, d->cap_max);
  if (d->cap[s] >= need) return V_OK;
  int nc = d->cap[s] ? d->cap[s] : 64;
  while (nc < need) nc *= 2;
  if (nc > d->cap_max) nc = d->cap_max;
  size_t used = 0;
  for (int i = 0; i < d->max_seq; i++) used += (size_t)d->cap[i] * bytes_per_local_pos(d);
  size_t add = (size_t)(nc - d->cap[s]) * bytes_per_local_pos(d);
  if (used + add > d->kv_limit)
    return VERR(NAME ": KV cache slot %d of rank %d: growing to %d positions would use %.2f GiB, past the %.2f GiB "
                "limit", s, d->rank, nc, (double)(used + add) / 1073741824.0, (double)d->kv_limit / 1073741824.0);
  for (int l = 0; l < d->L; l++) {
    float **kp = &d->kc[s * d->L + l], **vp = &d->vc[s * d->L + l];
    float *nk = realloc(*kp, (size_t)nc * d->H * d->qk * sizeof(float));
    if (!nk) return VERR(NAME ": out of memory growing the key cache of slot %d to %d positions", s, nc);
    *kp = nk;
    float *nv = realloc(*vp, (size_t)nc * d->H * d->vd * sizeof(float));
    if (!nv) return VERR(NAME ": out of memory growing the value cache of slot %d to %d positions", s, nc);
    *vp = nv;
  }
  d->cap[s] = nc;
  return V_OK;
}

static vstatus grow(float **p, size_t n, const char *what) {
  float *q = realloc(*p, (n > 0 ? n : 1) * sizeof(float));
  if (!q) return VERR(NAME ": out of memory for %s (%zu floats)", what, n);
  *p = q;
  return V_OK;
}

static vstatus ensure_rows(cpu_dcp *d, int T) {
  if (d->rows >= T) return V_OK;
  const size_t t = (size_t)T, w = (size_t)(d->qk + d->nope + d->vd);
  VTRY(grow(&d->send, t * d->Hl * w, "the q/k/v send buffer"));
  VTRY(grow(&d->recv, (size_t)d->N * t * d->Hl * w, "the gathered q/k/v"));
  VTRY(grow(&d->part, t * d->H * (size_t)(d->vd + 1), "the partial attention"));
  VTRY(grow(&d->parts, (size_t)d->N * t * d->H * (size_t)(d->vd + 1), "the gathered partial attention"));
  d->rows = T;
  return V_OK;
}

/* Steps 2-3: all-gathers this rank's per-head rows (q | k_nope | v when q != NULL, else
 * k_nope | v), then stores the K/V of all heads of the positions this rank owns.
 * Sets *gathered to [N, T, Hl, *width]. */
static vstatus exchange_store(cpu_dcp *d, int l, int T, const int *slot, const int *pos, const float *q,
                              const float *kv, const float *krot, int64_t ks, const float **gathered, int *width) {
  const int Hl = d->Hl, H = d->H, N = d->N, qk = d->qk, nope = d->nope, vd = d->vd, kvw = nope + vd;
  VTRY(ensure_rows(d, T));
  for (int t = 0; t < T; t++)
    if (pos[t] % N == d->rank && (slot[t] < 0 || slot[t] >= d->max_seq || pos[t] / N >= d->cap[slot[t]]))
      return VERR(NAME ": layer %d token %d: slot %d position %d is not reserved on rank %d", l, t, slot[t], pos[t],
                  d->rank);
  const int w = q ? qk + kvw : kvw;
  const float *src = kv; /* kv is already [T, Hl, nope + vd] */
  if (q) {
    for (int th = 0; th < T * Hl; th++) {
      memcpy(d->send + (size_t)th * w, q + (size_t)th * qk, sizeof(float) * qk);
      memcpy(d->send + (size_t)th * w + qk, kv + (size_t)th * kvw, sizeof(float) * kvw);
    }
    src = d->send;
  }
  VTRY(d->comm->allgather(d->comm, src, d->recv, (int64_t)T * Hl * w, DT_F32, NULL));
  const int kv0 = q ? qk : 0; /* offset of k_nope in a gathered row */
  for (int t = 0; t < T; t++) {
    if (pos[t] % N != d->rank) continue;
    const int s = slot[t], j = pos[t] / N;
    float *kd = d->kc[s * d->L + l] + (size_t)j * H * qk;
    float *vdst = d->vc[s * d->L + l] + (size_t)j * H * vd;
    for (int h = 0; h < H; h++) {
      const int rr = h / Hl, hl = h % Hl;
      const float *row = d->recv + (((size_t)rr * T + t) * Hl + hl) * w + kv0;
      memcpy(kd + (size_t)h * qk, row, sizeof(float) * nope);
      memcpy(kd + (size_t)h * qk + nope, krot + (int64_t)t * ks, sizeof(float) * d->rope);
      memcpy(vdst + (size_t)h * vd, row + nope, sizeof(float) * vd);
    }
  }
  *gathered = d->recv;
  *width = w;
  return V_OK;
}

vstatus cpu_dcp_fill(cpu_dcp *d, int l, int T, const int *slot, const int *pos, const float *kv, const float *krot,
                     int64_t krot_stride) {
  const float *g;
  int w;
  return exchange_store(d, l, T, slot, pos, NULL, kv, krot, krot_stride, &g, &w);
}

/* Step 4 for one (token, head): attention of q over the n cached keys k_j = k + j*ks,
 * values v_j = v + j*vs. o[vd] = sum_j p_j v_j with p = softmax(scale * k_j . q) over these n
 * keys only; returns lse = log sum_j exp(scale * k_j . q) (-inf and o = 0 when n = 0). The
 * softmax is cpu_softmax's: expf of max-subtracted scores, the sum in double. */
static float partial(float *o, const float *q, const float *k, int64_t ks, const float *v, int64_t vs, int n, int qk,
                     int vd, float scale, float *sc) {
  for (int i = 0; i < vd; i++) o[i] = 0.0f;
  if (n <= 0) return -INFINITY;
  float mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    const float *kj = k + (int64_t)j * ks;
    float dot = 0.0f;
    for (int i = 0; i < qk; i++) dot += kj[i] * q[i];
    sc[j] = dot * scale;
    if (sc[j] > mx) mx = sc[j];
  }
  double sum = 0.0;
  for (int j = 0; j < n; j++) {
    sc[j] = expf(sc[j] - mx);
    sum += sc[j];
  }
  for (int j = 0; j < n; j++) {
    const float p = (float)((double)sc[j] / sum);
    const float *vj = v + (int64_t)j * vs;
    for (int i = 0; i < vd; i++) o[i] += p * vj[i];
  }
  return (float)((double)mx + log(sum));
}

void cpu_dcp_combine(float *out, const float *o, const float *lse, int n, int64_t stride, int vd) {
  double M = -INFINITY;
  bool nan = false;
  for (int r = 0; r < n; r++) {
    const double x = lse[(int64_t)r * stride];
    if (x != x) nan = true;
    else if (x > M) M = x;
  }
  if (nan || M == INFINITY) {
    for (int i = 0; i < vd; i++) out[i] = NAN;
    return;
  }
  if (M == -INFINITY) { /* no part holds a visible key */
    for (int i = 0; i < vd; i++) out[i] = 0.0f;
    return;
  }
  double den = 0.0;
  for (int r = 0; r < n; r++) {
    const double x = lse[(int64_t)r * stride];
    if (x != -INFINITY) den += exp(x - M); /* weight 0 for -inf: o_r is not read */
  }
  for (int i = 0; i < vd; i++) {
    double acc = 0.0;
    for (int r = 0; r < n; r++) {
      const double x = lse[(int64_t)r * stride];
      if (x != -INFINITY) acc += exp(x - M) * (double)o[(int64_t)r * stride + i];
    }
    out[i] = (float)(acc / den);
  }
}

vstatus cpu_dcp_attention(cpu_dcp *d, int l, int T, const int *slot, const int *pos, const float *q,
                          const float *kv, const float *krot, int64_t krot_stride, float *att) {
  if (!q) return VERR(NAME ": attention: queries are required");
  const float *g;
  int w;
  VTRY(exchange_store(d, l, T, slot, pos, q, kv, krot, krot_stride, &g, &w));
  const int Hl = d->Hl, H = d->H, N = d->N, qk = d->qk, vd = d->vd, pw = vd + 1;
  /* step 4: partial attention of every (token, head of all ranks) over this rank's keys */
  int64_t work = 0;
  for (int t = 0; t < T; t++) work += (int64_t)cpu_dcp_owned(pos[t] + 1, d->rank, N) * H * (qk + vd);
  const int nt = work >= 65536 ? d->nthr : 1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (nt > 1)
  for (int th = 0; th < T * H; th++) {
    const int t = th / H, h = th % H, rr = h / Hl, hl = h % Hl, s = slot[t];
    const float *qh = g + (((size_t)rr * T + t) * Hl + hl) * w; /* q is first in a gathered row */
    float *o = d->part + (size_t)th * pw;
    float *sc = d->scores + (size_t)omp_get_thread_num() * d->cap_max;
    o[vd] = partial(o, qh, d->kc[s * d->L + l] + (size_t)h * qk, (int64_t)H * qk, d->vc[s * d->L + l] + (size_t)h * vd,
                    (int64_t)H * vd, cpu_dcp_owned(pos[t] + 1, d->rank, N), qk, vd, d->scale, sc);
  }
  /* step 5: gather the partials, combine this rank's heads */
  VTRY(d->comm->allgather(d->comm, d->part, d->parts, (int64_t)T * H * pw, DT_F32, NULL));
  const int64_t stride = (int64_t)T * H * pw; /* one rank's partials */
  for (int t = 0; t < T; t++)
    for (int hl = 0; hl < Hl; hl++) {
      const float *p0 = d->parts + ((size_t)t * H + (size_t)d->rank * Hl + hl) * pw;
      cpu_dcp_combine(att + ((size_t)t * Hl + hl) * vd, p0, p0 + vd, N, stride, vd);
    }
  return V_OK;
}

void cpu_dcp_trace(const cpu_dcp *d, vtrace *tr, const char *path, int T) {
  if (!tr || !d) return;
  char det[200];
  snprintf(det, sizeof det,
           "dcp=%d rank %d: kv positions p%%%d==%d, all %d heads; allgather q/k/v [%d, %d, %d] + partial o/lse "
           "[%d, %d, %d], lse combine",
           d->N, d->rank, d->N, d->rank, d->H, T, d->Hl, d->qk + d->nope + d->vd, T, d->H, d->vd + 1);
  vtrace_ran(tr, path, "dcp", d->comm->name, det);
}

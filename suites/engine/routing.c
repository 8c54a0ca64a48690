/* Forced routing of MoE experts (suites/engine/routing.h): the --routing option parsed, prepared for a
 * model, and the expert ids of each step. */
#include "suites/engine/routing.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/philox.h"

static vstatus read_trace(vrouting *r, const char *file) {
  FILE *f = fopen(file, "r");
  if (!f) return VERR("%s: cannot open routing trace: %s", file, strerror(errno));
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int lineno = 0, cap_lines = 0;
  vstatus s = V_OK;
  while (s == V_OK && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    char *p = line;
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p || *p == '#') continue;
    cJSON *j = cJSON_Parse(p);
    if (!j || !cJSON_IsArray(j) || cJSON_GetArraySize(j) < 1) {
      s = VERR("%s: line %d: expected an array of per-MoE-layer arrays of expert ids", file, lineno);
      cJSON_Delete(j);
      break;
    }
    int nl = cJSON_GetArraySize(j);
    int k = cJSON_IsArray(cJSON_GetArrayItem(j, 0)) ? cJSON_GetArraySize(cJSON_GetArrayItem(j, 0)) : 0;
    if (r->n_lines == 0) {
      r->n_layers = nl;
      r->k = k;
    }
    if (nl != r->n_layers || k != r->k || k < 1) {
      s = VERR("%s: line %d: %d layers of %d ids, but earlier lines have %d layers of %d ids", file, lineno, nl, k,
               r->n_layers, r->k);
      cJSON_Delete(j);
      break;
    }
    if (r->n_lines == cap_lines) {
      cap_lines = cap_lines ? 2 * cap_lines : 256;
      int32_t *n = realloc(r->ids, (size_t)cap_lines * nl * k * sizeof(int32_t));
      if (!n) {
        s = VERR("%s: out of memory reading the routing trace", file);
        cJSON_Delete(j);
        break;
      }
      r->ids = n;
    }
    int32_t *dst = r->ids + (size_t)r->n_lines * nl * k;
    for (int a = 0; a < nl && s == V_OK; a++) {
      cJSON *layer = cJSON_GetArrayItem(j, a);
      if (!cJSON_IsArray(layer) || cJSON_GetArraySize(layer) != k) {
        s = VERR("%s: line %d: layer entry %d must be an array of %d expert ids", file, lineno, a, k);
        break;
      }
      for (int b = 0; b < k; b++) {
        cJSON *e = cJSON_GetArrayItem(layer, b);
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
            e->valuedouble > 1e9) {
          s = VERR("%s: line %d: layer entry %d item %d: expert id must be a non-negative integer", file, lineno, a, b);
          break;
        }
        dst[a * k + b] = (int32_t)e->valuedouble;
        for (int c = 0; c < b; c++)
          if (dst[a * k + c] == dst[a * k + b]) {
            s = VERR("%s: line %d: layer entry %d: expert %d listed twice", file, lineno, a, (int)dst[a * k + b]);
            break;
          }
        if (s != V_OK) break;
      }
    }
    cJSON_Delete(j);
    if (s == V_OK) r->n_lines++;
  }
  free(line);
  fclose(f);
  if (s == V_OK && r->n_lines == 0) s = VERR("%s: routing trace has no token lines", file);
  return s;
}

vstatus vrouting_parse(const char *spec, vrouting *r) {
  memset(r, 0, sizeof *r);
  if (!spec) spec = "natural";
  snprintf(r->spec, sizeof r->spec, "%s", spec);
  char base[560];
  snprintf(base, sizeof base, "%s", spec);
  char *at = strrchr(base, '@');
  if (at && !strcmp(at, "@fixed") && (!strcmp(base, "uniform@fixed") || !strncmp(base, "zipf:", 5))) {
    r->fixed = true;
    *at = 0;
    spec = base;
  }
  if (!strcmp(spec, "natural")) r->kind = ROUTE_NATURAL;
  else if (!strcmp(spec, "uniform")) r->kind = ROUTE_UNIFORM;
  else if (!strncmp(spec, "zipf:", 5)) {
    char *end = NULL;
    r->kind = ROUTE_ZIPF;
    r->zipf_s = strtod(spec + 5, &end);
    if (end == spec + 5 || *end || !(r->zipf_s > 0) || r->zipf_s > 100)
      return VERR("--routing '%s': zipf exponent must be a number in (0, 100]", spec);
  } else if (!strncmp(spec, "trace:", 6)) {
    r->kind = ROUTE_TRACE;
    if (!spec[6]) return VERR("--routing '%s': trace needs a file (trace:FILE)", spec);
    vstatus s = read_trace(r, spec + 6);
    if (s != V_OK) vrouting_free(r);
    return s;
  } else {
    return VERR("--routing '%s': expected natural, uniform, zipf:S or trace:FILE (uniform and zipf:S take @fixed)",
                spec);
  }
  return V_OK;
}

void vrouting_free(vrouting *r) {
  free(r->ids);
  free(r->perm);
  free(r->cdf);
  r->ids = NULL;
  r->perm = NULL;
  r->cdf = NULL;
}

vstatus vrouting_prepare(vrouting *r, const ds_config *c, uint64_t seed) {
  r->E = c->n_routed_experts;
  r->K = c->num_experts_per_tok;
  r->n_moe = 0;
  for (int l = 0; l < c->num_hidden_layers; l++) r->n_moe += ds_layer_is_moe(c, l) ? 1 : 0;
  if (r->kind == ROUTE_NATURAL) return V_OK;
  if (r->n_moe == 0 || r->E <= 0) return VERR("--routing %s: the model has no MoE layers to route", r->spec);
  if (r->K < 1 || r->K > r->E) return VERR("--routing %s: top-k %d of %d experts", r->spec, r->K, r->E);
  if (r->kind == ROUTE_TRACE) {
    if (r->k != r->K)
      return VERR("%s: routing trace has %d ids per layer but the model's num_experts_per_tok is %d", r->spec + 6,
                  r->k, r->K);
    for (size_t i = 0; i < (size_t)r->n_lines * r->n_layers * r->k; i++)
      if (r->ids[i] >= r->E)
        return VERR("%s: line %zu: expert id %d outside the model's %d routed experts", r->spec + 6,
                    i / ((size_t)r->n_layers * r->k) + 1, (int)r->ids[i], r->E);
  }
  if (r->kind == ROUTE_ZIPF) {
    free(r->perm);
    free(r->cdf);
    r->perm = malloc((size_t)r->n_moe * r->E * sizeof(int));
    r->cdf = malloc((size_t)r->E * sizeof(double));
    if (!r->perm || !r->cdf) return VERR("--routing %s: out of memory", r->spec);
    double acc = 0;
    for (int i = 0; i < r->E; i++) r->cdf[i] = (acc += 1.0 / pow(i + 1.0, r->zipf_s));
    for (int i = 0; i < r->E; i++) r->cdf[i] /= acc;
    /* which expert holds each popularity rank: a seeded shuffle per MoE layer */
    const uint64_t key = philox_key(seed, "sweep.zipf.perm");
    for (int j = 0; j < r->n_moe; j++) {
      int *p = r->perm + (size_t)j * r->E;
      for (int i = 0; i < r->E; i++) p[i] = i;
      for (int i = r->E - 1; i > 0; i--) {
        int k = (int)(philox_unit(key, (uint64_t)j * r->E + i) * (i + 1));
        int t = p[i];
        p[i] = p[k];
        p[k] = t;
      }
    }
  }
  return V_OK;
}

static int zipf_rank(const double *cdf, int E, double u) {
  int lo = 0, hi = E - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (cdf[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

void vrouting_fill(const vrouting *r, uint64_t seed, int64_t step, int T, int32_t *out) {
  const int K = r->K, E = r->E;
  const uint64_t key = philox_key(seed, r->kind == ROUTE_ZIPF ? "sweep.route.zipf" : "sweep.route.uniform");
  for (int j = 0; j < r->n_moe; j++)
    for (int t = 0; t < T; t++) {
      int32_t *o = out + ((size_t)j * T + t) * K;
      if (r->kind == ROUTE_TRACE) {
        int64_t line = ((step * T + t) % r->n_lines + r->n_lines) % r->n_lines;
        memcpy(o, r->ids + ((size_t)line * r->n_layers + (size_t)(j % r->n_layers)) * K, (size_t)K * sizeof(int32_t));
        continue;
      }
      /* K distinct draws: rejection of repeats on one counter stream per (step, layer, token) */
      uint64_t base = ((((uint64_t)step * (uint64_t)r->n_moe + (uint64_t)j) * (uint64_t)T + (uint64_t)t) << 16);
      uint64_t ctr = 0;
      for (int k = 0; k < K; k++) {
        int32_t e = -1;
        for (int tries = 0; tries < 4096 && e < 0; tries++) {
          double u = philox_unit(key, base + ctr++);
          int32_t cand = r->kind == ROUTE_ZIPF ? r->perm[(size_t)j * E + zipf_rank(r->cdf, E, u)] : (int32_t)(u * E);
          if (cand >= E) cand = E - 1;
          bool dup = false;
          for (int q = 0; q < k; q++) dup |= o[q] == cand;
          if (!dup) e = cand;
        }
        for (int32_t c = 0; e < 0 && c < E; c++) { /* pathological skew: least index not taken */
          bool dup = false;
          for (int q = 0; q < k; q++) dup |= o[q] == c;
          if (!dup) e = c;
        }
        o[k] = e;
      }
    }
}

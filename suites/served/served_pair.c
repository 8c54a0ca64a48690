/* Server identity and the pair check (suites/served/served_pair.h). */
#include "suites/served/served_pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites/engine/record.h"

void served_identity_free(served_identity *id) {
  free(id->models_raw);
  free(id->version_raw);
  id->models_raw = id->version_raw = NULL;
}

vstatus served_identity_parse_models(const char *body, const char *shown, const char *model, served_identity *id) {
  cJSON *j = cJSON_Parse(body ? body : "");
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data"), *m, *found = NULL;
  vstatus s = V_OK;
  if (!cJSON_IsObject(j)) s = VERR("%s/v1/models: the answer is not a JSON object", shown);
  else if (!cJSON_IsArray(data) || cJSON_GetArraySize(data) == 0) s = VERR("%s/v1/models: field 'data': no list of models", shown);
  char names[400] = "";
  int i = 0;
  if (!s) cJSON_ArrayForEach(m, data) {
      const cJSON *mid = cJSON_GetObjectItemCaseSensitive(m, "id");
      if (!cJSON_IsString(mid)) { s = VERR("%s/v1/models: field 'data[%d].id': not a string", shown, i); break; }
      if (strlen(names) + strlen(mid->valuestring) + 3 < sizeof names)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", mid->valuestring);
      if (!found && (!model || !model[0] || !strcmp(model, mid->valuestring))) found = m;
      i++;
    }
  if (!s && !found) s = VERR("%s serves no model '%s' (it serves: %s): fix --server-model", shown, model, names);
  if (!s) {
    const cJSON *mid = cJSON_GetObjectItemCaseSensitive(found, "id"), *root = cJSON_GetObjectItemCaseSensitive(found, "root");
    const cJSON *ml = cJSON_GetObjectItemCaseSensitive(found, "max_model_len");
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(found, "owned_by");
    if (strlen(mid->valuestring) >= sizeof id->id)
      s = VERR("%s/v1/models: field 'id': longer than %zu characters", shown, sizeof id->id - 1);
    else if (root && !cJSON_IsNull(root) && !(cJSON_IsString(root) && strlen(root->valuestring) < sizeof id->root))
      s = VERR("%s/v1/models: field 'root' of model '%s': not a string of at most %zu characters", shown, mid->valuestring,
               sizeof id->root - 1);
    else if (ml && !cJSON_IsNull(ml) && !(cJSON_IsNumber(ml) && ml->valuedouble >= 1 && ml->valuedouble < 1e12 &&
                                          ml->valuedouble == (double)(long)ml->valuedouble))
      s = VERR("%s/v1/models: field 'max_model_len' of model '%s': not a token count", shown, mid->valuestring);
    else {
      snprintf(id->id, sizeof id->id, "%s", mid->valuestring);
      id->has_root = cJSON_IsString(root);
      snprintf(id->root, sizeof id->root, "%s", cJSON_IsString(root) ? root->valuestring : "");
      id->max_model_len = cJSON_IsNumber(ml) ? (long)ml->valuedouble : 0;
      snprintf(id->owned_by, sizeof id->owned_by, "%s", cJSON_IsString(ob) ? ob->valuestring : "");
    }
  }
  cJSON_Delete(j);
  return s;
}

void served_identity_parse_version(const char *body, served_identity *id) {
  cJSON *j = cJSON_Parse(body ? body : "");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "version");
  snprintf(id->version, sizeof id->version, "%s", cJSON_IsString(v) ? v->valuestring : "");
  vtext_one_line(id->version);
  cJSON_Delete(j);
}

vstatus served_identity_read(const served_conn *c, const char *model, served_identity *id) {
  memset(id, 0, sizeof *id);
  snprintf(id->url, sizeof id->url, "%s", c->shown);
  char *body = NULL;
  long code = 0;
  VTRY(served_get(c, "/v1/models", &body, &code));
  if (code != 200) {
    char head[160];
    snprintf(head, sizeof head, "%.150s", body ? body : "");
    vtext_one_line(head);
    free(body);
    return VERR("%s/v1/models: HTTP %ld: %s", c->shown, code, head);
  }
  vstatus s = served_identity_parse_models(body, c->shown, model, id);
  if (s) { free(body); return s; }
  id->models_raw = body;
  body = NULL;
  if ((s = served_get(c, "/version", &body, &code))) { served_identity_free(id); return s; }
  if (code == 200) {
    served_identity_parse_version(body, id);
    id->version_raw = body;
  } else {
    free(body);
    if (code != 404) {
      served_identity_free(id);
      return VERR("%s/version: HTTP %ld (expected 200, or 404 from a server without it)", c->shown, code);
    }
  }
  return V_OK;
}

vstatus served_pair_check(const served_identity *cand, const served_identity *ref) {
  if (strcmp(cand->id, ref->id))
    return VERR("the servers do not make a pair: field 'id' of /v1/models: --server %s serves '%s', --ref-server %s "
                "serves '%s' (both must serve the same model)", cand->url, cand->id, ref->url, ref->id);
  if (cand->has_root != ref->has_root || strcmp(cand->root, ref->root))
    return VERR("the servers do not make a pair: field 'root' of model '%s': --server %s has '%s', --ref-server %s has "
                "'%s' (both must load the same checkpoint)", cand->id, cand->url,
                cand->has_root ? cand->root : "(none)", ref->url, ref->has_root ? ref->root : "(none)");
  if (cand->max_model_len != ref->max_model_len)
    return VERR("the servers do not make a pair: field 'max_model_len' of model '%s': --server %s has %ld, --ref-server "
                "%s has %ld (0: not given; serve both with the same --max-model-len)", cand->id, cand->url,
                cand->max_model_len, ref->url, ref->max_model_len);
  return V_OK;
}

/* s cut at 64 KiB (on a UTF-8 boundary) as a JSON string. */
static cJSON *raw_json(const char *s) {
  if (!s) return cJSON_CreateNull();
  size_t n = strlen(s);
  if (n <= 65536) return cJSON_CreateString(s);
  n = 65536;
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  char *cut = malloc(n + 1);
  if (!cut) return NULL;
  memcpy(cut, s, n);
  cut[n] = 0;
  cJSON *j = cJSON_CreateString(cut);
  free(cut);
  return j;
}

cJSON *served_identity_json(const served_identity *id, const char *role) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  cJSON_AddStringToObject(o, "role", role);
  cJSON_AddStringToObject(o, "url", id->url);
  cJSON_AddStringToObject(o, "model", id->id);
  if (id->has_root) cJSON_AddStringToObject(o, "root", id->root);
  else cJSON_AddNullToObject(o, "root");
  if (id->max_model_len) cJSON_AddNumberToObject(o, "max_model_len", (double)id->max_model_len);
  else cJSON_AddNullToObject(o, "max_model_len");
  cJSON_AddStringToObject(o, "owned_by", id->owned_by);
  if (id->version_raw) cJSON_AddStringToObject(o, "version", id->version);
  else cJSON_AddNullToObject(o, "version");
  cJSON_AddItemToObject(o, "v1_models", raw_json(id->models_raw ? id->models_raw : ""));
  cJSON_AddItemToObject(o, "version_body", raw_json(id->version_raw));
  return o;
}

vstatus served_identity_note(const vrec_sink *sink, const served_identity *id, const char *role) {
  cJSON *e = served_identity_json(id, role);
  if (!e) return VERR("out of memory for the server's identity");
  vstatus s = rec_note_server(sink, e);
  cJSON_Delete(e);
  return s;
}

vstatus served_conn_note(const vrec_sink *sink, const served_conn *c, const char *model, const char *role) {
  if (!sink) return V_OK;
  served_identity id;
  VTRY(served_identity_read(c, model, &id));
  vstatus s = served_identity_note(sink, &id, role);
  served_identity_free(&id);
  return s;
}

vstatus served_spec_check(const char *option, const char *spec) {
  return served_launch_wanted(spec) ? served_launch_check(option, spec) : served_url_check(option, spec);
}

/* Opens one side; a 'launch:CMD' spec is started first (its log: the run's logs/<path_prefix>.log). */
static vstatus open_one(const vrec_sink *sink, served_side *s, const char *url, const char *model, double timeout_s,
                        const char *role, const char *path_prefix) {
  memset(s, 0, sizeof *s);
  if (served_launch_wanted(url)) {
    VTRY(served_launch_start(&s->launch, path_prefix[0] == 'r' ? "--ref-server" : "--server", url, sink, path_prefix,
                             SERVED_LAUNCH_WAIT_S));
    url = s->launch.url;
  }
  VTRY(served_conn_init(&s->conn, url, timeout_s));
  VTRY(served_identity_read(&s->conn, model, &s->id));
  s->role = role;
  snprintf(s->path, sizeof s->path, "%s:%.250s", path_prefix, s->id.id);
  return V_OK;
}

vstatus served_pair_open(const vrec_sink *sink, const char *url, const char *ref_url, const char *model, double timeout_s,
                         served_side sv[2], int *n) {
  *n = 0;
  memset(sv, 0, 2 * sizeof *sv);
  vstatus s = open_one(sink, &sv[0], url, model, timeout_s, ref_url ? "candidate" : "server", "server");
  if (s) verr_prefix("--server");
  else if (ref_url && (s = open_one(sink, &sv[1], ref_url, model, timeout_s, "reference", "ref-server")))
    verr_prefix("--ref-server");
  else if (ref_url)
    s = served_pair_check(&sv[0].id, &sv[1].id);
  for (int i = 0; s == V_OK && i < (ref_url ? 2 : 1); i++) s = served_identity_note(sink, &sv[i].id, sv[i].role);
  if (s != V_OK) { /* nothing half-open stays: what was launched stops, what was read is freed */
    served_pair_close(sv, 2);
    return s;
  }
  *n = ref_url ? 2 : 1;
  return V_OK;
}

void served_pair_close(served_side *sv, int n) {
  for (int i = 0; i < n; i++) {
    served_identity_free(&sv[i].id);
    served_launch_stop(&sv[i].launch);
  }
}

void served_side_print(const served_side *s) {
  printf("%s %s: model %s (root %s, max_model_len ", s->role, s->conn.shown, s->id.id,
         s->id.has_root ? s->id.root : "not given");
  if (s->id.max_model_len) printf("%ld", s->id.max_model_len);
  else printf("not given");
  printf(", owned_by %s, version %s)\n", s->id.owned_by[0] ? s->id.owned_by : "-",
         s->id.version_raw ? s->id.version : "no /version");
}

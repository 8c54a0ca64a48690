/* Who a server is, and whether two servers make a pair: the candidate build (--server) and the
 * reference build of the same engine (--ref-server) must serve the same model, or every comparison
 * between them measures the difference of two models.
 *
 * Identity is read from GET /v1/models (the served model's id, root, max_model_len, owned_by: vLLM
 * and SGLang give all four; llama.cpp's server the id and owned_by) and GET /version (vLLM answers
 * {"version": "0.x.y"}; a server without it answers 404, which is not an error). The raw texts of both
 * answers are kept, and go to the run's manifest (`servers`, results-schema/manifest.schema.json)
 * with the URL as shown (no credentials); the API key is never part of an identity. */
#ifndef VOUCH_SUITES_SERVED_SERVED_PAIR_H
#define VOUCH_SUITES_SERVED_SERVED_PAIR_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "common/vstatus.h"
#include "suites/engine/sink.h"
#include "suites/served/served.h"
#include "suites/served/served_launch.h"

/* What a server says of itself. */
typedef struct {
  char url[512];         /* the server's URL as shown (served_conn.shown: no user:password@, no query) */
  char id[256];          /* the served model's id (the one asked, else the first listed) */
  char root[512];        /* its "root" (vLLM: the checkpoint path or hub name; "" when not given) */
  bool has_root;         /* root was given */
  long max_model_len;    /* its "max_model_len" (0 when not given) */
  char owned_by[128];    /* its "owned_by" ("vllm", "sglang", "llamacpp"; "" when not given) */
  char version[128];     /* /version's "version" ("" when the server has no /version) */
  char *models_raw;      /* the body of GET /v1/models as received (owned) */
  char *version_raw;     /* the body of GET /version, NULL when it answered 404 (owned) */
} served_identity;

/* Reads the identity of the server at c: /v1/models (its model `model`, NULL or "": the first listed)
 * and /version. Error (naming the server) when /v1/models cannot be reached, answers an HTTP error,
 * lists no such model, or is malformed, or when /version answers anything but 200 or 404. */
vstatus served_identity_read(const served_conn *c, const char *model, served_identity *id);
/* The /v1/models part from its body (untrusted) into *id (models_raw not set): errors name `shown` and
 * the field. The same checks as served_identity_read. */
vstatus served_identity_parse_models(const char *body, const char *shown, const char *model, served_identity *id);
/* The /version part from its body (200) into id->version: a body that is not {"version": string} leaves
 * version "" (some servers answer /version with other shapes); never an error. */
void served_identity_parse_version(const char *body, served_identity *id);
void served_identity_free(served_identity *id);

/* Refuses a pair before any request: V_OK when the candidate and the reference serve the same model id,
 * the same root (both absent counts as the same) and the same max_model_len (0, not given, too); else
 * a one-line error naming both servers and the field that differs. */
vstatus served_pair_check(const served_identity *cand, const served_identity *ref);

/* The manifest's entry of a server: {role, url, model, root, max_model_len, owned_by, version,
 * v1_models, version_body} (results-schema/manifest.schema.json `servers`); the raw bodies are cut
 * at 64 KiB. role: "candidate", "reference" or "server". NULL on out of memory. */
cJSON *served_identity_json(const served_identity *id, const char *role);
/* Adds the server to the run `sink` (vsuite_ctx.sink; rec_note_server: the manifest's `servers`, in the
 * store's meta table with it), once per (role, url, model). Nothing when sink is NULL (a suite on its
 * own). Error: the store's, naming it. */
vstatus served_identity_note(const vrec_sink *sink, const served_identity *id, const char *role);
/* The same for a server a suite opened by token ids (served_target_open, or served_models: features,
 * diverge and evals with --server alone, sweep --server): reads the identity of the server at c, its
 * model `model` (served_identity_read), and notes it with `role` ("server"). Nothing, and no request,
 * when sink is NULL (a suite on its own: no manifest). Error: the server's (naming it and the field;
 * /version answering other than 200 or 404 is one), or the store's. */
vstatus served_conn_note(const vrec_sink *sink, const served_conn *c, const char *model, const char *role);

/* One server of a suite that judges servers (eval mrcr --dataset, diverge --ref-server). */
typedef struct {
  served_conn conn;      /* URL, its shown form, the API key (never recorded) */
  served_identity id;    /* what it said of itself before any request */
  const char *role;      /* "candidate", "reference", or "server" (--server alone) */
  char path[300];        /* the records' path: "server:<model>" (--server) or "ref-server:<model>" */
  served_launch launch;  /* the server vouch started (--server 'launch:CMD'); launch.live false: a URL */
} served_side;

/* Checks a --server / --ref-server value as the option is parsed: an http(s) URL (served_url_check) or
 * 'launch:CMD' holding {port} (served_launch_check). V_ERR naming the option. */
vstatus served_spec_check(const char *option, const char *spec);
/* Opens --server (and --ref-server when ref_url is not NULL; either may be 'launch:CMD', started here,
 * served_launch.h, and stopped by served_pair_close or on the error) with model `model` (NULL: each server's
 * first): each identity is read, the pair checked (served_pair_check) before any request, and each
 * server noted in the manifest of the run `sink` (NULL: none, a suite on its own). sv[0] is the
 * candidate, sv[1] the reference; *n gets 1 or 2. Error (naming the server and the field):
 * unreachable, no such model, not a pair, or the run's store. */
vstatus served_pair_open(const vrec_sink *sink, const char *url, const char *ref_url, const char *model, double timeout_s,
                         served_side sv[2], int *n);
void served_pair_close(served_side *sv, int n);
/* One line naming the server and what it said of itself ("server URL: model M (root R, max_model_len L,
 * owned_by O, version V)") on stdout. */
void served_side_print(const served_side *s);

#endif

/* Credential redaction by value (common/redact.c): each credential kind is caught under any
 * surrounding text, and the figures vouch records (hashes, paths, tensor and variant names,
 * case ids) are kept. */
#include <stdlib.h>
#include <string.h>

#include "common/redact.h"
#include "tests/harness.h"

static void expect(const char *in, const char *want) {
  char *d = redact_dup(in);
  CHECK(d && !strcmp(d, want), "redact(\"%s\") = \"%s\", want \"%s\"", in, d ? d : "(null)", want);
  free(d);
}

int main(void) {
  /* planted credentials (these are made up; none was ever valid) */
  expect("ghp_Zx8Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc", "***");
  expect("token gho_Ab12Cd34Ef56Gh78Ij90Kl12Mn34 end", "token *** end");
  expect("ghs_ABCDEFGHIJ0123456789abcd", "***");
  expect("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "***");
  expect("--label=hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456", "--label=***");
  expect("sk-proj-Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8", "***");
  expect("id AKIAIOSFODNN7EXAMPLE,", "id ***,");
  expect("ASIAY34FZKBOKMUTVV7A", "***");
  expect("xoxb-123456789012-abcdefghijkl", "***");
  expect("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
         "Bearer ***");
  expect("https://alice:s3cr3t@proxy.example.com:8080/path", "https://***@proxy.example.com:8080/path");
  expect("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "***");
  expect("SECRET=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY;", "SECRET=***;");
  /* a random part of a path is judged on its own (the path as a whole is not random) */
  expect("/a/b/c/d/e/f/g/h/wJalrXUtnFEMI4K7MDENGabPxRfiCYEXAMPLEKEY", "/a/b/c/d/e/f/g/h/***");
  expect("x=/a/b/c/d/e/f/g/wJalrXUtnFEMI4K7MDENGabPxRfiCYEXAMPLEKEY/h", "x=/a/b/c/d/e/f/g/***/h");
  expect("a ghp_Zx8Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc and hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456",
         "a *** and ***");
  /* kept: what a manifest or a record legitimately holds */
  const char *keep[] = {
      "3f9df21022d274e65ca799419b6b7fe469d33f11",
      "38f18c2bc3058966096c245769db2d0ac142e8eb914002a4ab8fa213a5a512d2",
      "/usr/local/cuda/lib64/stubs/LibCuda12Main",
      "/root/.cargo/bin:/root/.pyenv/plugins/pyenv-virtualenv/shims",
      "decode/tp1/b8/ctx1024/spec0-0/uniform@fixed",
      /* kernels case ids that were once redacted to one "***" (seeds 1000 and 1001 then collided) */
      "linear/latency/table/edge/129x1031/B17/heavy/s1000", "linear/latency/table/edge/129x1031/B17/heavy/s1001",
      "NVIDIA_H200_141GB_HBM3e_SXM5_Version2",
      "model.layers.3.mlp.experts.12.down_proj.weight",
      "latency:tp8@tp_rsag", "v11_cp_m2", "https://github.com/o/r.git", "git@github.com:o/r.git",
      "ssh://git@github.com/o/r", "hf_short", "sk-short", "AKIA1234", "task-ghp_", "myhf_QwErTyUiOpAsDfGhJkLzXcVbNm123456",
      "sha256 38f18c2bc3058966096c245769db2d0ac142e8eb914002a4ab8fa213a5a512d2", ""};
  for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
    expect(keep[i], keep[i]);
    CHECK(!redact_has_credential(keep[i]), "no credential in \"%s\"", keep[i]);
  }
  CHECK(redact_has_credential("x ghp_Zx8Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz0Xc"), "has_credential");

  /* the allow-list of environment variables */
  const char *allowed[] = {"CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", "OMP_NUM_THREADS", "VOUCH_HISTORY_DB",
                           "GITHUB_RUN_ID", "GITHUB_REF", "CI", "LANG"};
  const char *left_out[] = {"GH_PAT", "HOME", "PATH", "AWS_ACCESS_KEY_ID", "MY_VAR", "CIRCLE", "GITHUB_TOKEN",
                            "HF_TOKEN", "SSH_AUTH_SOCK"};
  for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
    CHECK(redact_env_allowed(allowed[i]), "%s recorded", allowed[i]);
  for (size_t i = 0; i < sizeof left_out / sizeof *left_out; i++)
    CHECK(!redact_env_allowed(left_out[i]), "%s left out", left_out[i]);

  /* the line stream: a token split over two writes of one line is caught */
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  FILE *f = redact_stream(mem);
  CHECK(f != NULL, "redact_stream");
  if (f) {
    fprintf(f, "step 1 token=ghp_Zx8Qw2Er4Ty6");
    fflush(f);
    fprintf(f, "Ui8Op0As2Df4Gh6Jk8Lz0Xc ok\nlast line hf_QwErTyUiOpAsDfGhJkLzXcVbNm123456");
    CHECK(fclose(f) == 0, "close");
    CHECK(buf && !strcmp(buf, "step 1 token=*** ok\nlast line ***"), "stream: \"%s\"", buf ? buf : "(null)");
  }
  free(buf);
  return test_finish();
}

#include "runner/evidence/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

static void to_hex(const unsigned char *md, char hex[65]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 32; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 15];
  }
  hex[64] = 0;
}

vstatus sha256_hex(const void *data, size_t len, char hex[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
    return VERR("sha256: EVP_Digest failed");
  to_hex(md, hex);
  return V_OK;
}

vstatus sha256_file_hex(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (!f) return VERR("%s: cannot open for hashing: %s", path, strerror(errno));
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
    fclose(f);
    EVP_MD_CTX_free(ctx);
    return VERR("%s: sha256 init failed", path);
  }
  unsigned char buf[1 << 16];
  size_t n;
  int ok = 1;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    if (!EVP_DigestUpdate(ctx, buf, n)) ok = 0;
  int rerr = ferror(f);
  fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (!EVP_DigestFinal_ex(ctx, md, &mdlen)) ok = 0;
  EVP_MD_CTX_free(ctx);
  if (rerr) return VERR("%s: read error while hashing", path);
  if (!ok || mdlen != 32) return VERR("%s: sha256 failed", path);
  to_hex(md, hex);
  return V_OK;
}

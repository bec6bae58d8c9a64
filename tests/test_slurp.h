/* A whole file as a NUL-terminated string, for the tests that read what a command wrote (NULL when it cannot be
 * read; len, when not NULL, gets its size). The caller frees it. */
#ifndef FA8_TEST_SLURP_H
#define FA8_TEST_SLURP_H
#include <stdio.h>
#include <stdlib.h>

static inline char *test_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0, got;
  char *buf = malloc(cap + 1);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *nb = realloc(buf, (cap *= 2) + 1);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) return NULL;
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}
#endif

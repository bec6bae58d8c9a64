#include "gpu_mem.h"
void *h_gpu_alloc(size_t n) { (void)n; return NULL; }
void h_gpu_free(void *p) { (void)p; }
int h_gpu_put(void *dst, const void *src, size_t n) { (void)dst; (void)src; (void)n; return -1; }
int h_gpu_get(void *dst, const void *src, size_t n) { (void)dst; (void)src; (void)n; return -1; }
int h_gpu_count(void) { return 0; }
int h_gpu_times_ms(int (*fn)(void *ctx), void *ctx, int warmup, int reps, double *out) {
  (void)fn; (void)ctx; (void)warmup; (void)reps; (void)out;
  return -1;
}
void h_gpu_versions(char *cuda, size_t n1, char *driver, size_t n2) {
  if (n1) cuda[0] = '\0';
  if (n2) driver[0] = '\0';
}

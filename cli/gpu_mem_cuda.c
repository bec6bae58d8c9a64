#include "gpu_mem.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

void *h_gpu_alloc(size_t n) {
  void *p = NULL;
  if (cudaMalloc(&p, n ? n : 16) != cudaSuccess) return NULL;
  if (cudaMemset(p, 0, n ? n : 16) != cudaSuccess) { cudaFree(p); return NULL; }
  return p;
}
void h_gpu_free(void *p) { if (p) cudaFree(p); }
int h_gpu_put(void *dst, const void *src, size_t n) { return cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice) != cudaSuccess; }
int h_gpu_get(void *dst, const void *src, size_t n) {
  return cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost) != cudaSuccess;
}
int h_gpu_count(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

#include <stdlib.h>
static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
/* All `reps` timings (ms, sorted ascending) of fn(ctx) after `warmup` runs, by device events. 0 ok. */
int h_gpu_times_ms(int (*fn)(void *ctx), void *ctx, int warmup, int reps, double *out) {
  for (int i = 0; i < warmup; ++i) if (fn(ctx)) return -1;
  if (cudaDeviceSynchronize() != cudaSuccess || reps < 1) return -1;
  cudaEvent_t a, b;
  if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) return -1;
  int bad = 0;
  for (int i = 0; i < reps && !bad; ++i) {
    float ms = 0;
    cudaEventRecord(a, 0);
    bad = fn(ctx);
    cudaEventRecord(b, 0);
    bad = bad || cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess;
    out[i] = ms;
  }
  cudaEventDestroy(a); cudaEventDestroy(b);
  if (bad) return -1;
  qsort(out, (size_t)reps, sizeof(double), cmp_double);
  return 0;
}
/* "CUDA 13.0" runtime and driver versions as text. */
void h_gpu_versions(char *cuda, size_t n1, char *driver, size_t n2) {
  int r = 0, d = 0;
  cudaRuntimeGetVersion(&r);
  cudaDriverGetVersion(&d);
  snprintf(cuda, n1, "%d.%d", r / 1000, (r % 1000) / 10);
  snprintf(driver, n2, "%d.%d", d / 1000, (d % 1000) / 10);   /* the CUDA version the driver supports, */
  /* unless the kernel module names its own release (Linux): that is what users compare against */
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (f) {
    char line[256], ver[32];
    if (fgets(line, sizeof line, f)) {
      /* "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.159.04  Release Build ...": the first
       * token after "Kernel Module" that starts with a digit */
      const char *k = strstr(line, "Kernel Module");
      for (const char *c = k ? k + strlen("Kernel Module") : NULL; c && *c; ) {
        int used = 0;
        if (sscanf(c, " %31s%n", ver, &used) != 1) break;
        if (ver[0] >= '0' && ver[0] <= '9') { snprintf(driver, n2, "%s", ver); break; }
        c += used;
      }
    }
    fclose(f);
  }
}


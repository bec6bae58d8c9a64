#include "gpu_mem.h"
#include <cuda_runtime_api.h>

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

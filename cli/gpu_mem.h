/* Device memory for the harness (probe, run, GPU tests): plain cudaMalloc/cudaMemcpy when fa8 has a GPU
 * backend, refusals otherwise. */
#ifndef FA8_GPU_MEM_H
#define FA8_GPU_MEM_H
#include <stddef.h>
void *h_gpu_alloc(size_t n);                                 /* zeroed; NULL on failure */
void h_gpu_free(void *p);
int h_gpu_put(void *dst, const void *src, size_t n);         /* 0 ok */
int h_gpu_get(void *dst, const void *src, size_t n);         /* synchronous; 0 ok */
int h_gpu_count(void);                                       /* usable devices (0 without a GPU backend) */


/* All timings (ms, sorted ascending) of fn(ctx) after warmup, by device events; 0 ok. */
int h_gpu_times_ms(int (*fn)(void *ctx), void *ctx, int warmup, int reps, double *out);
void h_gpu_versions(char *cuda, size_t n1, char *driver, size_t n2);
#endif

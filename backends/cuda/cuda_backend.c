/* CUDA backend host side: the device-properties cache (the only global state: filled lazily, under a lock),
 * launching generated instances, and the few device-memory operations the runtime needs. Plain C against
 * the CUDA runtime API. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>
#include "fa8_internal.h"

#define MAX_DEVICES 64

typedef struct {
  int filled;
  int major, minor, sms;
  size_t smem_optin;
  char arch[16];      /* the fa8 target this device runs: "sm_90a", "sm_89", or "" when none */
  char name[256];
} props;

static props cache[MAX_DEVICES];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static const props *device_props(fa8_status *st) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess || dev < 0 || dev >= MAX_DEVICES) {
    *st = fa8__fail(FA8_ERR_UNSUPPORTED, "backend cuda: no usable CUDA device (%s)", cudaGetErrorString(e));
    return NULL;
  }
  pthread_mutex_lock(&cache_lock);
  props *p = &cache[dev];
  if (!p->filled) {
    struct cudaDeviceProp dp;
    e = cudaGetDeviceProperties(&dp, dev);
    if (e != cudaSuccess) {
      pthread_mutex_unlock(&cache_lock);
      *st = fa8__fail(FA8_ERR_BACKEND, "cudaGetDeviceProperties(%d): %s", dev, cudaGetErrorString(e));
      return NULL;
    }
    p->major = dp.major; p->minor = dp.minor; p->sms = dp.multiProcessorCount;
    p->smem_optin = dp.sharedMemPerBlockOptin;
    snprintf(p->name, sizeof p->name, "%s", dp.name);
    /* SASS for sm_90a runs on compute capability 9.0 only, sm_89 on 8.9 only (no PTX is embedded) */
    if (dp.major == 9 && dp.minor == 0) snprintf(p->arch, sizeof p->arch, "sm_90a");
    else if (dp.major == 8 && dp.minor == 9) snprintf(p->arch, sizeof p->arch, "sm_89");
    else p->arch[0] = '\0';
    p->filled = 1;
  }
  pthread_mutex_unlock(&cache_lock);
  return p;
}

int32_t fa8__cuda_sm_count(fa8_backend be) {
  (void)be;
  fa8_status st;
  const props *p = device_props(&st);
  return p ? p->sms : 0;
}

const char *fa8__cuda_name(fa8_backend be) {
  (void)be;
  fa8_status st;
  const props *p = device_props(&st);
  return p ? p->name : "";
}

const char *fa8__cuda_arch(fa8_backend be) {
  if (be != FA8_BACKEND_CUDA) return NULL;
  fa8_status st;
  const props *p = device_props(&st);
  return p ? p->arch : NULL;
}

fa8_status fa8__cuda_check_device(fa8_backend be) {
  (void)be;   /* runtime/src/gpu.c routes only CUDA here */
  fa8_status st = FA8_OK;
  const props *p = device_props(&st);
  if (!p) return st;
  if (!p->arch[0])
    return fa8__fail(FA8_ERR_UNSUPPORTED, "CUDA device '%s' (compute capability %d.%d) has no FP8 kernels in this build "
                     "(built for sm_89 and sm_90a)", p->name, p->major, p->minor);
  return FA8_OK;
}

fa8_status fa8__cuda_run(const fa8_kernel_desc *d, const void *args, void *stream) {
  if (!d->gpu_launch) return fa8__fail(FA8_ERR_BACKEND, "instance %s has no GPU entry point", d->name);
  /* the config model sized the instance's shared memory (gen/fa8/constraints.lua, static_asserted against the
   * kernel) for its target; a device of that target with less than the target's figure gets a clear refusal
   * here instead of the launch's "invalid argument" */
  fa8_status st = FA8_OK;
  const props *p = device_props(&st);
  if (!p) return st;
  if (d->smem_bytes > 0 && (size_t)d->smem_bytes > p->smem_optin)
    return fa8__fail(FA8_ERR_UNSUPPORTED, "%s needs %d bytes of shared memory per block; CUDA device '%s' allows %zu",
                     d->name, (int)d->smem_bytes, p->name, p->smem_optin);
  const int rc = d->gpu_launch(args, stream);
  if (rc != 0)
    return fa8__fail(FA8_ERR_BACKEND, "%s: CUDA error %d (%s)", d->name, rc, cudaGetErrorString((cudaError_t)rc));
  return FA8_OK;
}

fa8_status fa8__cuda_memset(void *p, size_t n, void *stream) {
  cudaError_t e = cudaMemsetAsync(p, 0, n, (cudaStream_t)stream);
  return e == cudaSuccess ? FA8_OK : fa8__fail(FA8_ERR_BACKEND, "cudaMemsetAsync: %s", cudaGetErrorString(e));
}

/* Copy n bytes to the host and wait for the stream (only the statistics path, which is opt-in, does this). */
fa8_status fa8__cuda_download(void *host, const void *dev, size_t n, void *stream) {
  cudaError_t e = cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, (cudaStream_t)stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
  return e == cudaSuccess ? FA8_OK : fa8__fail(FA8_ERR_BACKEND, "copying statistics to the host: %s", cudaGetErrorString(e));
}

/* The runtime's GPU hooks, routed to the backend a call is for: CUDA (backends/cuda) or HIP (backends/hip).
 * Each backend is either built in or replaced by its *_absent.c stub, so both sets always link. */
#include "fa8_internal.h"

#define IS_HIP(be) ((be) == FA8_BACKEND_HIP)

const char *fa8__gpu_arch(fa8_backend be) { return IS_HIP(be) ? fa8__hip_arch(be) : fa8__cuda_arch(be); }
int32_t fa8__gpu_sm_count(fa8_backend be) { return IS_HIP(be) ? fa8__hip_sm_count(be) : fa8__cuda_sm_count(be); }
const char *fa8__gpu_name(fa8_backend be) { return IS_HIP(be) ? fa8__hip_name(be) : fa8__cuda_name(be); }
fa8_status fa8__gpu_check_device(fa8_backend be) {
  return IS_HIP(be) ? fa8__hip_check_device(be) : fa8__cuda_check_device(be);
}
fa8_status fa8__gpu_run(const fa8_kernel_desc *d, const void *args, void *stream) {
  return IS_HIP(d->backend) ? fa8__hip_run(d, args, stream) : fa8__cuda_run(d, args, stream);
}
fa8_status fa8__gpu_memset(fa8_backend be, void *p, size_t n, void *stream) {
  return IS_HIP(be) ? fa8__hip_memset(p, n, stream) : fa8__cuda_memset(p, n, stream);
}
fa8_status fa8__gpu_download(fa8_backend be, void *host, const void *dev, size_t n, void *stream) {
  return IS_HIP(be) ? fa8__hip_download(host, dev, n, stream) : fa8__cuda_download(host, dev, n, stream);
}

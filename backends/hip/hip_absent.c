/* Built when fa8 has no HIP backend: the HIP hooks (runtime/src/gpu.c routes to them) report that plainly. */
#include "fa8_internal.h"

const char *fa8__hip_arch(fa8_backend be) { (void)be; return NULL; }
int32_t fa8__hip_sm_count(fa8_backend be) { (void)be; return 0; }
const char *fa8__hip_name(fa8_backend be) { (void)be; return ""; }
fa8_status fa8__hip_check_device(fa8_backend be) {
  (void)be;
  return fa8__fail(FA8_ERR_UNSUPPORTED, "backend hip is not built into this fa8 (configure with -Dhip=enabled and clang-19)");
}
fa8_status fa8__hip_run(const fa8_kernel_desc *d, const void *args, void *stream) {
  (void)args; (void)stream;
  return fa8__fail(FA8_ERR_UNSUPPORTED, "instance %s needs a GPU backend this build lacks", d->name);
}
fa8_status fa8__hip_memset(void *p, size_t n, void *stream) { (void)p; (void)n; (void)stream; return FA8_ERR_UNSUPPORTED; }
fa8_status fa8__hip_download(void *host, const void *dev, size_t n, void *stream) {
  (void)host; (void)dev; (void)n; (void)stream;
  return FA8_ERR_UNSUPPORTED;
}

/* Built when fa8 has no CUDA backend: the runtime's GPU hooks report that plainly. */
#include "fa8_internal.h"

const char *fa8__gpu_arch(fa8_backend be) { (void)be; return NULL; }
int32_t fa8__gpu_sm_count(fa8_backend be) { (void)be; return 0; }
const char *fa8__gpu_name(fa8_backend be) { (void)be; return ""; }
fa8_status fa8__gpu_check_device(fa8_backend be) {
  return fa8__fail(FA8_ERR_UNSUPPORTED, "backend %s is not built into this fa8 (the CPU backend is)",
                   be == FA8_BACKEND_CUDA ? "cuda" : "hip");
}
fa8_status fa8__gpu_run(const fa8_kernel_desc *d, const void *args, void *stream) {
  (void)args; (void)stream;
  return fa8__fail(FA8_ERR_UNSUPPORTED, "instance %s needs a GPU backend this build lacks", d->name);
}
fa8_status fa8__gpu_memset(void *p, size_t n, void *stream) { (void)p; (void)n; (void)stream; return FA8_ERR_UNSUPPORTED; }
fa8_status fa8__gpu_download(void *host, const void *dev, size_t n, void *stream) {
  (void)host; (void)dev; (void)n; (void)stream;
  return FA8_ERR_UNSUPPORTED;
}

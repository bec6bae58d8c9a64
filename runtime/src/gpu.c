/* The runtime's GPU hooks, routed to the backend a call is for: CUDA (backends/cuda) or HIP (backends/hip).
 * Each backend is either built in or replaced by its *_absent.c stub, so both sets always link. */
#include <stdio.h>
#include <string.h>
#include "fa8_internal.h"

#define IS_HIP(be) ((be) == FA8_BACKEND_HIP)

/* Planning (fa8_plan_for_device; fa8 list --tuned --device T:N): dispatch and tuned lookups answer as if the backend's device were
 * target T with N multiprocessors, on a machine without it; nothing runs while it is set. Process-wide, set
 * once by the CLI before any call. */
static struct { fa8_backend be; char arch[32]; int32_t sms; int on; } plan;

fa8_status fa8_plan_for_device(fa8_backend be, const char *arch, int32_t sms) {
  fa8__clear_error();
  if (!arch) { plan.on = 0; return FA8_OK; }
  if ((int)be < 0 || be > FA8_BACKEND_HIP) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "backend (%d) is not a valid fa8_backend", (int)be);
  if (be == FA8_BACKEND_CPU) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "planning for a device needs a GPU backend, not cpu");
  if (!*arch || strlen(arch) >= sizeof plan.arch) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "device target '%s' is not a target name", arch);
  if (sms < 0) return fa8__fail(FA8_ERR_INVALID_ARGUMENT, "device multiprocessor count (%d) is negative", (int)sms);
  plan.be = be;
  snprintf(plan.arch, sizeof plan.arch, "%s", arch);
  plan.sms = sms;
  plan.on = 1;
  return FA8_OK;
}
#define PLANNED(backend_) (plan.on && plan.be == (backend_))

const char *fa8__gpu_arch(fa8_backend be) {
  if (PLANNED(be)) return plan.arch;
  return IS_HIP(be) ? fa8__hip_arch(be) : fa8__cuda_arch(be);
}
int32_t fa8__gpu_sm_count(fa8_backend be) {
  if (PLANNED(be)) return plan.sms;
  return IS_HIP(be) ? fa8__hip_sm_count(be) : fa8__cuda_sm_count(be);
}
const char *fa8__gpu_name(fa8_backend be) {
  if (PLANNED(be)) return "(planned, no device)";
  return IS_HIP(be) ? fa8__hip_name(be) : fa8__cuda_name(be);
}
fa8_status fa8__gpu_check_device(fa8_backend be) {
  if (PLANNED(be)) return FA8_OK;
  return IS_HIP(be) ? fa8__hip_check_device(be) : fa8__cuda_check_device(be);
}
fa8_status fa8__gpu_run(const fa8_kernel_desc *d, const void *args, void *stream) {
  if (PLANNED(d->backend))
    return fa8__fail(FA8_ERR_UNSUPPORTED, "%s is planned for %s, not present: nothing runs", d->name, plan.arch);
  return IS_HIP(d->backend) ? fa8__hip_run(d, args, stream) : fa8__cuda_run(d, args, stream);
}
fa8_status fa8__gpu_memset(fa8_backend be, void *p, size_t n, void *stream) {
  return IS_HIP(be) ? fa8__hip_memset(p, n, stream) : fa8__cuda_memset(p, n, stream);
}
fa8_status fa8__gpu_download(fa8_backend be, void *host, const void *dev, size_t n, void *stream) {
  return IS_HIP(be) ? fa8__hip_download(host, dev, n, stream) : fa8__cuda_download(host, dev, n, stream);
}

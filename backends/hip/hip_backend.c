/* HIP backend host side: finds the HIP runtime at run time (dlopen of libamdhip64), loads each instance's
 * embedded code object per device on first use, launches kernels through the module API, and the few
 * device-memory operations the runtime needs. No HIP headers or link-time dependency: a build with HIP runs
 * anywhere, and without an AMD GPU the API reports that plainly instead of failing to load.
 * The device's architecture is found by loading a code object: the runtime refuses one built for another
 * gfx target, so the first architecture of this build whose code object loads is the device's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "fa8_internal.h"
#include "fa8_hip_host.h"

typedef int herr;   /* hipError_t; 0 = hipSuccess */
static struct {
  int tried, ok;
  char why[256];
  herr (*init)(unsigned);
  herr (*get_device_count)(int *);
  herr (*get_device)(int *);
  herr (*device_get_name)(char *, int, int);
  herr (*module_load_data)(void **, const void *);
  herr (*module_get_function)(void **, void *, const char *);
  herr (*module_launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                               void **, void **);
  herr (*memset_async)(void *, int, size_t, void *);
  herr (*memcpy_async)(void *, const void *, size_t, int, void *);
  herr (*stream_synchronize)(void *);
  const char *(*get_error_string)(herr);
} hip;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define HIP_MEMCPY_DEVICE_TO_HOST 2

/* Load the runtime once. Returns 1 when usable; otherwise hip.why says why. */
static int load_runtime(void) {
  pthread_mutex_lock(&lock);
  if (!hip.tried) {
    hip.tried = 1;
    static const char *names[] = { "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5" };
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; ++i) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      snprintf(hip.why, sizeof hip.why, "backend hip: the HIP runtime (libamdhip64) is not installed or not loadable");
    } else {
#define SYM(field, name) *(void **)&hip.field = dlsym(h, name)
      SYM(init, "hipInit"); SYM(get_device_count, "hipGetDeviceCount"); SYM(get_device, "hipGetDevice");
      SYM(device_get_name, "hipDeviceGetName");
      SYM(module_load_data, "hipModuleLoadData"); SYM(module_get_function, "hipModuleGetFunction");
      SYM(module_launch_kernel, "hipModuleLaunchKernel"); SYM(memset_async, "hipMemsetAsync");
      SYM(memcpy_async, "hipMemcpyAsync"); SYM(stream_synchronize, "hipStreamSynchronize");
      SYM(get_error_string, "hipGetErrorString");
#undef SYM
      int n = 0;
      if (!hip.init || !hip.get_device_count || !hip.get_device || !hip.module_load_data || !hip.module_get_function ||
          !hip.module_launch_kernel || !hip.memset_async || !hip.memcpy_async || !hip.stream_synchronize)
        snprintf(hip.why, sizeof hip.why, "backend hip: libamdhip64 lacks the module API fa8 needs");
      else if (hip.init(0) != 0 || hip.get_device_count(&n) != 0 || n <= 0)
        snprintf(hip.why, sizeof hip.why, "backend hip: no AMD GPU is visible to the HIP runtime");
      else
        hip.ok = 1;
    }
  }
  const int ok = hip.ok;
  pthread_mutex_unlock(&lock);
  return ok;
}

static const char *err_str(herr e) { return hip.get_error_string ? hip.get_error_string(e) : "unknown HIP error"; }

static int current_device(void) {
  int d = 0;
  return hip.get_device(&d) == 0 && d >= 0 && d < FA8_HIP_MAX_DEVICES ? d : -1;
}

/* the module of `m` on the current device, loaded on first use (NULL: it does not load here) */
static void *module_for(fa8_hip_module *m, herr *e) {
  const int dev = current_device();
  *e = 0;
  if (dev < 0) { *e = 101; return NULL; }   /* hipErrorInvalidDevice */
  pthread_mutex_lock(&lock);
  void *mod = m->loaded[dev];
  if (!mod && (*e = hip.module_load_data(&mod, m->code)) == 0) m->loaded[dev] = mod;
  pthread_mutex_unlock(&lock);
  return mod;
}

/* The instances this build carries, from the generated table: the architecture of the device is the first
 * of theirs whose code object loads. Cached per device. */
static char arch_cache[FA8_HIP_MAX_DEVICES][16];
static int arch_known[FA8_HIP_MAX_DEVICES];

extern fa8_hip_module *const fa8_hip_probe_modules[];   /* fa8_hip_modules.c (generated): one per architecture */

const char *fa8__hip_arch(fa8_backend be) {
  (void)be;
  if (!load_runtime()) return NULL;
  const int dev = current_device();
  if (dev < 0) return NULL;
  if (!arch_known[dev]) {
    for (fa8_hip_module *const *p = fa8_hip_probe_modules; *p; ++p) {
      herr e;
      if (module_for(*p, &e)) { snprintf(arch_cache[dev], sizeof arch_cache[dev], "%s", (*p)->arch); break; }
    }
    arch_known[dev] = 1;
  }
  return arch_cache[dev];
}

/* 0 (unknown): hipDeviceAttribute numbering differs between ROCm releases, and the count only refines tuned
 * lookups, which fall back to any count */
int32_t fa8__hip_sm_count(fa8_backend be) { (void)be; return 0; }

const char *fa8__hip_name(fa8_backend be) {
  (void)be;
  static char name[FA8_HIP_MAX_DEVICES][256];
  if (!load_runtime() || !hip.device_get_name) return "";
  const int dev = current_device();
  if (dev < 0 || hip.device_get_name(name[dev], (int)sizeof name[dev], dev) != 0) return "";
  return name[dev];
}

fa8_status fa8__hip_check_device(fa8_backend be) {
  if (!load_runtime()) return fa8__fail(FA8_ERR_UNSUPPORTED, "%s", hip.why);
  const char *arch = fa8__hip_arch(be);
  if (!arch || !arch[0])
    return fa8__fail(FA8_ERR_UNSUPPORTED, "backend hip: AMD device '%s' runs none of this build's code objects "
                     "(built for gfx942 and gfx90a)", fa8__hip_name(be));
  return FA8_OK;
}

fa8_status fa8__hip_run(const fa8_kernel_desc *d, const void *args, void *stream) {
  if (!d->gpu_launch) return fa8__fail(FA8_ERR_BACKEND, "instance %s has no GPU entry point", d->name);
  if (!load_runtime()) return fa8__fail(FA8_ERR_UNSUPPORTED, "%s", hip.why);
  const int rc = d->gpu_launch(args, stream);
  if (rc != 0) return fa8__fail(FA8_ERR_BACKEND, "%s: HIP error %d (%s)", d->name, rc, err_str(rc));
  return FA8_OK;
}

int fa8_hip_launch(fa8_hip_module *m, const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                   const void *args, size_t size, void *stream) {
  herr e;
  void *mod = module_for(m, &e), *fn = NULL;
  if (!mod) return e ? e : 200;   /* hipErrorInvalidImage */
  if ((e = hip.module_get_function(&fn, mod, kernel)) != 0) return e;
  /* the argument block as one buffer (HIP_LAUNCH_PARAM_BUFFER_POINTER / _SIZE / _END) */
  size_t sz = size;
  void *extra[] = { (void *)1, (void *)args, (void *)2, &sz, (void *)3 };
  return hip.module_launch_kernel(fn, gx, gy, gz, threads, 1, 1, 0, stream, NULL, extra);
}

int fa8_hip_memset(void *p, size_t n, void *stream) { return hip.memset_async(p, 0, n, stream); }

fa8_status fa8__hip_memset(void *p, size_t n, void *stream) {
  if (!load_runtime()) return fa8__fail(FA8_ERR_UNSUPPORTED, "%s", hip.why);
  const herr e = hip.memset_async(p, 0, n, stream);
  return e == 0 ? FA8_OK : fa8__fail(FA8_ERR_BACKEND, "hipMemsetAsync: %s", err_str(e));
}

fa8_status fa8__hip_download(void *host, const void *dev, size_t n, void *stream) {
  if (!load_runtime()) return fa8__fail(FA8_ERR_UNSUPPORTED, "%s", hip.why);
  herr e = hip.memcpy_async(host, dev, n, HIP_MEMCPY_DEVICE_TO_HOST, stream);
  if (e == 0) e = hip.stream_synchronize(stream);
  return e == 0 ? FA8_OK : fa8__fail(FA8_ERR_BACKEND, "copying statistics to the host: %s", err_str(e));
}

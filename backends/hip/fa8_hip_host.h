/* What a generated HIP launcher (templates/hip/launch.c.tpl) needs from the HIP host side
 * (backends/hip/hip_backend.c): an instance's embedded code object, loaded per device on first use, and a
 * launch of one of its kernels with a packed kernel-argument block. Plain C: no HIP headers. */
#ifndef FA8_HIP_HOST_H
#define FA8_HIP_HOST_H

#include <stddef.h>
#include "fa8_kernel_abi.h"

#define FA8_HIP_MAX_DEVICES 16

typedef struct {
  const char *instance;              /* fa8 instance name, for errors */
  const char *arch;                  /* the gfx target its code object is built for */
  const unsigned char *code;         /* the code object (ELF, amdgcn) */
  const size_t *code_size;
  void *loaded[FA8_HIP_MAX_DEVICES]; /* hipModule_t per device, filled under the backend's lock */
} fa8_hip_module;

/* Enqueue kernel `kernel` of `m` on `stream` with grid (gx, gy, gz) x `threads`; args/size is the kernel
 * argument block (laid out as the kernel's parameters). Returns 0 or a HIP error code. */
int fa8_hip_launch(fa8_hip_module *m, const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                   const void *args, size_t size, void *stream);
/* Zero n bytes of device memory on `stream`. Returns 0 or a HIP error code. */
int fa8_hip_memset(void *p, size_t n, void *stream);

#endif

/* HIP backend without AMD hardware (the `hip` suite; built when the HIP backend is): the build carries an
 * instance with a launcher for every direction on each AMD target, and the API answers a HIP call on a
 * machine without the HIP runtime or an AMD GPU with a clear error instead of crashing. What the kernels
 * compile to is tools/check-gcn's job (test hip-gcn). */
#include <criterion/criterion.h>
#include <string.h>
#include "fa8.h"
#include "fa8_instances.h"

Test(hip, every_direction_on_each_amd_target) {
  static const char *targets[] = { "gfx942", "gfx90a" };
  for (size_t t = 0; t < 2; ++t) {
    int seen[4] = { 0, 0, 0, 0 };
    for (size_t i = 0; i < fa8_instance_count; ++i) {
      const fa8_kernel_desc *d = &fa8_instances[i];
      if (d->backend != FA8_BACKEND_HIP || strcmp(d->target, targets[t]) != 0) continue;
      cr_expect(d->gpu_launch != NULL, "%s has no launcher", d->name);
      seen[d->dir] = 1;
    }
    cr_expect(seen[FA8_DIR_QUANT] && seen[FA8_DIR_FWD] && seen[FA8_DIR_DELTA] && seen[FA8_DIR_BWD],
              "%s: quant %d fwd %d delta %d bwd %d", targets[t], seen[FA8_DIR_QUANT], seen[FA8_DIR_FWD],
              seen[FA8_DIR_DELTA], seen[FA8_DIR_BWD]);
  }
}

Test(hip, no_device_is_a_clear_error) {
  fa8_problem p;
  fa8_problem_init(&p);
  p.backend = FA8_BACKEND_HIP;
  p.batch = 1; p.heads = 2; p.kv_heads = 2; p.seqlen_q = 64; p.seqlen_k = 64; p.hdim_qk = 64; p.hdim_v = 64;
  p.fmt_qkv = FA8_FMT_E4M3FNUZ; p.fmt_grad = FA8_FMT_E4M3FNUZ;
  fa8_dispatch_names names;
  const fa8_status st = fa8_dispatch(&p, &names);
  cr_assert_eq(st, FA8_ERR_UNSUPPORTED, "status %d: %s", (int)st, fa8_last_error());
  const char *msg = fa8_last_error();
  cr_expect(strstr(msg, "backend hip") != NULL, "message: %s", msg);
  cr_expect(strstr(msg, "libamdhip64") != NULL || strstr(msg, "AMD GPU") != NULL || strstr(msg, "AMD device") != NULL,
            "message does not say what is missing: %s", msg);
}

/* Links against a bundle generated for an AMD target (fa8 gen --target gfx942) and asks for a HIP dispatch: on a
 * machine without the HIP runtime or an AMD GPU the API must answer FA8_ERR_UNSUPPORTED naming the backend,
 * not crash. tools/examples runs it (step 4). */
#include <stdio.h>
#include <string.h>
#include "fa8.h"
int main(void) {
  fa8_problem p;
  fa8_problem_init(&p);
  p.backend = FA8_BACKEND_HIP;
  p.batch = 1; p.heads = 2; p.kv_heads = 2; p.seqlen_q = 64; p.seqlen_k = 64; p.hdim_qk = 64; p.hdim_v = 64;
  p.fmt_qkv = FA8_FMT_E4M3FNUZ; p.fmt_grad = FA8_FMT_E4M3FNUZ;
  fa8_dispatch_names n;
  fa8_status st = fa8_dispatch(&p, &n);
  printf("hip_unavailable: status %d: %s\n", (int)st, fa8_last_error());
  return st == FA8_ERR_UNSUPPORTED && strstr(fa8_last_error(), "backend hip") ? 0 : 1;
}

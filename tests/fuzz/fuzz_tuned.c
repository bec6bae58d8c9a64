/* libFuzzer target: the tuned-table parser (runtime/src/tuned_parse.c) on arbitrary bytes. It must accept or
 * refuse with a message, never crash, read out of bounds or leak; accepted rows must satisfy the format's
 * invariants. Instances resolve against two fake descriptors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fa8_internal.h"

static const fa8_kernel_desc fwd = { .name = "fa8_fwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1", .key = "fa8_fwd_e4m3_d64v64_gqa_full",
                                     .target = "cpu", .backend = FA8_BACKEND_CPU, .dir = FA8_DIR_FWD };
static const fa8_kernel_desc bwd = { .name = "fa8_bwd_cpu_e4m3_d64v64_gqa_full_m64n64_w1s1", .key = "fa8_bwd_e4m3_d64v64_gqa_full",
                                     .target = "cpu", .backend = FA8_BACKEND_CPU, .dir = FA8_DIR_BWD };

static const fa8_kernel_desc *find(const char *name) {
  if (!strcmp(name, fwd.name)) return &fwd;
  if (!strcmp(name, bwd.name)) return &bwd;
  return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fa8__trow *rows = NULL;
  size_t n = 0;
  if (fa8__tuned_parse((const char *)data, size, "fuzz.csv", find, &rows, &n) == FA8_OK) {
    for (size_t i = 0; i < n; ++i) {
      const fa8__trow *r = &rows[i];
      if (!r->instance || r->median_us <= 0 || r->seq < 1 || (r->seq & (r->seq - 1)) || r->bh < 1 || (r->bh & (r->bh - 1)))
        abort();
    }
    free(rows);
  } else if (rows || n) {
    abort();
  }
  return 0;
}

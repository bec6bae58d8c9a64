/* fa8 enumerations shared by the public API, the kernel ABI and the generated descriptor tables.
 * The generator (gen/fa8/schema.lua) asserts these values in every generated fa8_desc.h, so the Lua model
 * and C cannot drift apart. */
#ifndef FA8_TYPES_H
#define FA8_TYPES_H

#include "fa8_fp8.h"   /* fa8_fmt */

typedef enum { FA8_DIR_QUANT = 0, FA8_DIR_FWD = 1, FA8_DIR_DELTA = 2, FA8_DIR_BWD = 3 } fa8_dir;

/* MHA: H == Hkv; MQA: Hkv == 1; GQA: any H % Hkv == 0 (covers MHA and MQA); MLA: hdim_qk != hdim_v. */
typedef enum { FA8_LAYOUT_MHA = 0, FA8_LAYOUT_GQA = 1, FA8_LAYOUT_MQA = 2, FA8_LAYOUT_MLA = 3 } fa8_layout;

/* How the backward's softmax correction delta_i is computed (docs/numerics.md). */
typedef enum {
  FA8_DELTA_STALE = 0,    /* rowsum(dO o O): the saved-output shortcut, mismatched under FP8 */
  FA8_DELTA_DOHAT = 1,    /* rowsum(dO^ o O): fixes only the dO mismatch */
  FA8_DELTA_MATCHED = 2,  /* sum_j P_ij dP^_ij: Delta-Matching (default) */
  FA8_DELTA_SPLIT = 3     /* rowsum(dO^ o (O + R)) with a two-term FP8 P in the forward */
} fa8_delta_mode;

typedef enum { FA8_FWD_STD = 0, FA8_FWD_SPLIT = 1 } fa8_fwd_variant;
typedef enum { FA8_SCALE_BLOCK = 0, FA8_SCALE_TENSOR = 1 } fa8_scale_granularity;
typedef enum { FA8_IN_F32 = 0, FA8_IN_BF16 = 1 } fa8_intype;
typedef enum { FA8_BACKEND_CPU = 0, FA8_BACKEND_CUDA = 1, FA8_BACKEND_HIP = 2 } fa8_backend;
typedef enum { FA8_PIPE_SCALAR = 0, FA8_PIPE_MMA = 1, FA8_PIPE_WGMMA = 2, FA8_PIPE_MFMA = 3 } fa8_pipeline;
typedef enum { FA8_LSE_LN_SCALED = 0 } fa8_lse_convention;

#endif

/* The kernel ABI: argument blocks every generated instance takes, on every backend.
 * Tensors carry explicit element strides; the innermost dimension is contiguous. The runtime (fa8.h) fills
 * these from the user's problem descriptor after validation, so kernels never re-check arguments. */
#ifndef FA8_KERNEL_ABI_H
#define FA8_KERNEL_ABI_H

#include <stdint.h>
#include "fa8_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* [B, S, heads, D], D contiguous. FP8 codes (uint8), BF16 (uint16) or float, as the field says. */
typedef struct { const void *ptr; int64_t sb, ss, sh; } fa8_cten;
typedef struct { void *ptr; int64_t sb, ss, sh; } fa8_ten;
/* Transposed FP8 copy [B, heads, D, S_pad], S contiguous (S_pad = S rounded up to 16, zero padded). */
typedef struct { const void *ptr; int64_t sb, sh, sd; } fa8_ctent;
typedef struct { void *ptr; int64_t sb, sh, sd; } fa8_tent;
/* Block scales [B, heads, nblk]: one FP32 scale per (b, head, block of `rows` sequence rows), block index
 * contiguous. Per-tensor scaling: sb = sh = 0 and rows = INT32_MAX (always block 0). */
typedef struct { const float *ptr; int64_t sb, sh; int32_t rows; } fa8_scales;
typedef struct { float *ptr; int64_t sb, sh; int32_t rows; } fa8_scales_out;
/* Per-row FP32 statistics [B, H, Sq] (LSE, delta), Sq contiguous. */
typedef struct { const float *ptr; int64_t sb, sh; } fa8_crow;
typedef struct { float *ptr; int64_t sb, sh; } fa8_row;
/* Optional per-row row-sum diagnostics of dS, FP64 [B, H, Sq] each (all NULL: not collected). */
typedef struct {
  double *pre;       /* sum_j dS_ij before the FP8 cast */
  double *post;      /* sum_j dS^_ij after the cast (decoded, tile scale applied) */
  double *abs_pre;   /* sum_j |dS_ij| */
  double *abs_post;  /* sum_j |dS^_ij| */
  double *ra;        /* sum_j P_ij (|dP^_ij| + |delta_i|): the scale of FP32 rounding in the row sum */
  int64_t sb, sh;
} fa8_rowdiag;

/* quant: x [B,S,H,D] (float or bf16) -> codes [B,S,H,D] + transposed copy + block scales.
 * Work item = (b, h, scale block). A block containing NaN/Inf gets scale NaN (the runtime reports it). */
typedef struct {
  int32_t B, S, H, D;
  fa8_cten x;                 /* element type from the instance's intype */
  fa8_ten out;                /* uint8 codes, row layout */
  fa8_tent out_t;             /* uint8 codes, transposed; ptr may be NULL (not wanted) */
  fa8_scales_out scale;
  const float *fixed_scale;   /* non-NULL: per-tensor mode, use this scale for every block (amax found by the runtime) */
  int32_t pow2_scale;         /* round scales up to a power of two */
} fa8_quant_args;

/* fwd. Work item = (b, h, query tile). */
typedef struct {
  int32_t B, Sq, Sk, H, Hkv;
  float softmax_scale;
  fa8_cten q, k, v;           /* codes (float for the f32 test format) */
  fa8_ctent kt, vt;           /* transposed copies for K-major MMAs (GPU fast paths; may be NULL elsewhere) */
  fa8_scales q_scale, k_scale, v_scale;
  fa8_ten o;                  /* BF16 [B,Sq,H,Dv] */
  fa8_ten o_f32;              /* FP32 copy, ptr may be NULL */
  fa8_ten o_rem;              /* split forward only: BF16 remainder O - bf16(O) */
  fa8_row lse;                /* natural log of sum exp(c q.k) (convention ln_scaled) */
} fa8_fwd_args;

/* delta prep. Work item = (b, h, query tile). */
typedef struct {
  int32_t B, Sq, Sk, H, Hkv;
  float softmax_scale;
  fa8_cten q, k, v, do_hat;   /* codes; q, k only read by `matched` */
  fa8_scales q_scale, k_scale, v_scale, do_scale;
  fa8_cten dout;              /* dO before its FP8 cast (stale only) */
  fa8_intype dout_type;
  fa8_cten o, o_rem;          /* saved BF16 output; o_rem for split */
  fa8_crow lse;
  fa8_row delta;
} fa8_delta_args;

/* main backward. Work item = (b, kv head): it owns dK/dV of that head and dQ of the group's query heads. */
typedef struct {
  int32_t B, Sq, Sk, H, Hkv;
  float softmax_scale;
  fa8_cten q, k, v, do_hat;
  fa8_ctent qt, kt, dot;      /* transposed copies (GPU fast paths) */
  fa8_scales q_scale, k_scale, v_scale, do_scale;
  fa8_crow lse, delta;
  fa8_ten dq, dk, dv;         /* FP32 */
  fa8_rowdiag diag;
} fa8_bwd_args;

/* CPU entry points: every CPU instance exports NAME (one work item) and NAME_items (how many). */
typedef void (*fa8_cpu_run_fn)(const void *args, int64_t item);
typedef int64_t (*fa8_cpu_items_fn)(const void *args);
/* GPU entry points: every CUDA/HIP instance exports NAME_launch(args, stream), returning 0 or the runtime's
 * error code; it enqueues its kernels on the stream and never synchronizes. */
typedef int (*fa8_gpu_launch_fn)(const void *args, void *stream);
/* CUDA instances also export NAME_attrs(out): the timed kernel's resources as the CUDA runtime reports them, local
 * memory per thread included (> 0 where ptxas spilled registers); 0 or the runtime's error code. The tuner skips
 * candidates that spill. */
typedef struct { int32_t regs, local_bytes; } fa8_gpu_attrs;
typedef int (*fa8_gpu_attrs_fn)(fa8_gpu_attrs *out);

#ifdef __cplusplus
}
#endif
#endif

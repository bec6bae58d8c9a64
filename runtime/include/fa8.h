/* fa8 — FP8 attention for training: public C API (C99).
 *
 * Flow of one attention call in training:
 *   fa8_quantize(Q), (K), (V)            -> FP8 codes + block scales (+ transposed copies for GPU MMAs)
 *   fa8_forward                          -> O (BF16, optionally FP32), LSE, and for delta=split the remainder R
 *   fa8_quantize(dO)                     -> FP8 dO
 *   fa8_backward                         -> dQ, dK, dV (FP32), delta, optional row-sum statistics of dS
 * Every call validates its arguments and returns a status; fa8_last_error() then names the bad argument.
 * Workspace is caller-provided (query its size first); nothing is allocated on the GPU hot path.
 * Thread-safe: no global mutable state (the error text is thread-local). */
#ifndef FA8_H
#define FA8_H

#include <stddef.h>
#include <stdint.h>
#include "fa8_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FA8_VERSION_STRING "0.1.0"

typedef enum {
  FA8_OK = 0,
  FA8_ERR_INVALID_ARGUMENT = 1,  /* a size, enum or value out of range */
  FA8_ERR_NULL_POINTER = 2,      /* a required pointer is NULL */
  FA8_ERR_MISALIGNED = 3,        /* a pointer is not aligned for its element type */
  FA8_ERR_BAD_STRIDES = 4,       /* strides overlap, are negative, or the innermost one is not 1 */
  FA8_ERR_UNSUPPORTED = 5,       /* a geometry/format no built instance covers */
  FA8_ERR_WORKSPACE = 6,         /* workspace missing or too small */
  FA8_ERR_NONFINITE = 7,         /* a quantized block held NaN/Inf */
  FA8_ERR_BACKEND = 8,           /* the backend failed (CUDA error, thread creation, ...) */
  FA8_ERR_OUT_OF_MEMORY = 9
} fa8_status;

/* A short generic message for a status. */
const char *fa8_status_string(fa8_status s);
/* The detailed message of the most recent fa8 call in this thread (names the argument and its value);
 * empty when that call succeeded. */
const char *fa8_last_error(void);

typedef enum { FA8_DTYPE_F32 = 0, FA8_DTYPE_BF16 = 1, FA8_DTYPE_FP8 = 2 } fa8_dtype;

/* A 4-d tensor view. Logical shapes are given by the problem; strides are in elements.
 *   sequence tensors  [B, S, heads, D]: stride[3] must be 1
 *   row statistics    [B, heads, S]   : stride[0], stride[1], stride[2] (= 1), stride[3] unused */
typedef struct {
  void *data;
  fa8_dtype dtype;
  int64_t stride[4];
} fa8_tensor;

/* A quantized operand: FP8 codes in row layout, optionally the transposed copy [B, heads, D, S_pad]
 * (S_pad = S rounded up to 16; GPU MMA paths need it, the CPU does not), and FP32 scales [B, heads, nblk]
 * contiguous, nblk = ceil(S / scale_rows). scale_rows == 0 means one scale for the whole tensor. */
typedef struct {
  fa8_tensor data;
  fa8_tensor data_t;       /* data_t.data may be NULL */
  float *scales;
  int32_t scale_rows;
  fa8_fmt fmt;
} fa8_qtensor;

/* ---- quantization ---- */
typedef struct {
  int32_t batch, seqlen, heads, hdim;
  fa8_fmt fmt;                 /* FP8 format of the output */
  int32_t scale_rows;          /* rows per scale block; 0 = per-tensor */
  int32_t pow2_scales;         /* 1 (default): scales rounded up to powers of two; 0: amax / fmt max */
  fa8_backend backend;
  int32_t num_threads;         /* CPU: 0 = all cores */
} fa8_quant_problem;

void fa8_quant_problem_init(fa8_quant_problem *p);
/* Scale count for a quantized tensor: batch * heads * nblk. */
int64_t fa8_quant_scale_count(const fa8_quant_problem *p);
/* Workspace fa8_quantize needs (the GPU's per-tensor amax reduction; 0 on the CPU). */
fa8_status fa8_quantize_workspace(const fa8_quant_problem *p, size_t *bytes);
/* x: F32 or BF16 [B, S, H, D]. out: data (FP8), optional data_t, scales; out->fmt / scale_rows are set.
 * On the CPU a block holding NaN/Inf makes the call return FA8_ERR_NONFINITE; on a GPU the call is
 * asynchronous, so such a block is marked by a NaN scale instead (the backward then yields NaN). */
fa8_status fa8_quantize(const fa8_quant_problem *p, const fa8_tensor *x, fa8_qtensor *out, void *workspace,
                        size_t workspace_bytes, void *stream);

/* ---- attention ---- */
typedef struct {
  int32_t batch, seqlen_q, seqlen_k, heads, kv_heads, hdim_qk, hdim_v;
  int32_t causal;              /* bottom-right aligned, as FlashAttention 2+ */
  float softmax_scale;         /* 0: 1/sqrt(hdim_qk) */
  fa8_delta_mode delta;        /* default FA8_DELTA_MATCHED */
  fa8_fmt fmt_qkv, fmt_grad;   /* formats of Q/K/V and of dO/dS (default E4M3 both) */
  fa8_backend backend;         /* default FA8_BACKEND_CPU */
  const char *instance;        /* force an instance (or bundle delta instance) by name; NULL: dispatch */
  int32_t num_threads;         /* CPU: 0 = all cores */
  int32_t collect_stats;       /* backward: compute dS row-sum statistics (needs workspace) */
  int32_t scale_rows;          /* the quantization fa8_dispatch and fa8_candidates assume: rows per Q/K/V/dO scale
                                  block, 0 per-tensor (default 128, fa8_quantize's); fa8_forward and fa8_backward read
                                  the tensors' own. Some instances serve per-tensor scales only (a 192-key forward) */
} fa8_problem;

void fa8_problem_init(fa8_problem *p);

typedef struct {
  fa8_qtensor q, k, v;
  fa8_tensor o;                /* BF16 [B, Sq, H, Dv] */
  fa8_tensor o_f32;            /* optional FP32 copy (data NULL: not written) */
  fa8_tensor o_rem;            /* BF16 remainder O - bf16(O); required when delta == split */
  fa8_tensor lse;              /* F32 [B, H, Sq] */
} fa8_fwd_tensors;

/* dS row-sum residuals, per row |sum_j dS_ij| normalized two ways (docs/numerics.md), over rows with a
 * visible key: "abs" by sum_j |dS_ij|, "ra" (rounding-aware) by sum_j P_ij (|dP^_ij| + |delta_i|). */
typedef struct {
  double pre_mean, pre_max, post_mean, post_max;          /* abs-normalized, before / after the FP8 cast */
  double pre_ra_mean, pre_ra_max, post_ra_mean, post_ra_max;
  int64_t rows;
} fa8_rowsum_stats;

typedef struct {
  fa8_qtensor q, k, v, dout_q; /* quantized operands (dout_q: dO cast to fmt_grad) */
  fa8_tensor dout;             /* dO before its cast (F32/BF16); required for delta == stale */
  fa8_tensor o, o_rem, lse;    /* saved by the forward (o_rem for split) */
  fa8_tensor delta;            /* F32 [B, H, Sq]: written (the correction the backward used) */
  fa8_tensor dq, dk, dv;       /* F32 [B, S, heads, D] */
  fa8_rowsum_stats *stats;     /* filled when problem->collect_stats */
} fa8_bwd_tensors;

fa8_status fa8_forward_workspace(const fa8_problem *p, size_t *bytes);
fa8_status fa8_forward(const fa8_problem *p, const fa8_fwd_tensors *t, void *workspace, size_t workspace_bytes,
                       void *stream);
fa8_status fa8_backward_workspace(const fa8_problem *p, size_t *bytes);
fa8_status fa8_backward(const fa8_problem *p, const fa8_bwd_tensors *t, void *workspace, size_t workspace_bytes,
                        void *stream);

/* Names of the instances a problem dispatches to (for logs and tests); FA8_ERR_UNSUPPORTED when one of the
 * forward, delta prep or backward has no fitting instance (fa8_last_error says which and why). */
typedef struct {
  const char *fwd, *delta, *bwd;
  const char *fwd_why, *bwd_why;   /* why: a tuned-table row (file:line) or the heuristic; thread-local text,
                                      valid until this thread's next fa8_dispatch */
} fa8_dispatch_names;
fa8_status fa8_dispatch(const fa8_problem *p, fa8_dispatch_names *out);

/* Tuned tables (docs/tuning.md). Dispatch consults, in order: the overlay (a CSV table from `fa8 tune`,
 * loaded by this call or from the file named by the environment variable FA8_TUNED_TABLE at the first
 * dispatch), the table compiled into the build, then the heuristic. Overlay rows must name instances this
 * build contains; a malformed file is refused with file:line. path NULL drops the overlay. */
fa8_status fa8_tuning_overlay(const char *path);
/* on = 0: ignore every tuned table (the heuristic alone; `fa8 tune` measures its gain against this). */
void fa8_tuning_enable(int on);

/* For autotuners. The instances of this build that can run problem p, in dispatch order: forward instances
 * (backward = 0) or backward bundles for p->delta (backward = 1), each forcible through p->instance. Up to
 * max names go to names[]; *count gets how many fit in all. */
fa8_status fa8_candidates(const fa8_problem *p, int backward, const char **names, int max, int *count);
/* The functional key of an instance or bundle name ("fa8_fwd_e4m3_d128v128_gqa_full"), and for a bundle
 * its backward instance; NULL when the name is not in this build. */
const char *fa8_instance_key(const char *name);
const char *fa8_bundle_backward(const char *bundle);
/* The resources a CUDA instance's timed kernel gets on this process's device, as the CUDA runtime reports them:
 * registers and local memory per thread (> 0 where ptxas spilled registers). For a backward bundle, the larger
 * of its delta prep's and backward's, and *which names that kernel. FA8_ERR_UNSUPPORTED for CPU and HIP instances
 * and without a CUDA device; FA8_ERR_INVALID_ARGUMENT for a name not in this build. Autotuners skip candidates
 * that spill. */
fa8_status fa8_instance_resources(const char *name, int32_t *regs, int32_t *local_bytes, const char **which);
/* The target name tables use for a backend on this machine ("sm_90a", "cpu"), its SM (or thread) count for
 * p->num_threads, and the device name. FA8_ERR_UNSUPPORTED without a device. */
fa8_status fa8_device_info(const fa8_problem *p, const char **target, int32_t *sm_count, const char **name);
/* Planning without the device: until called again with target NULL, fa8_dispatch, fa8_candidates, the tuned
 * lookup and fa8_device_info answer for `backend` as if its device were `target` (an fa8 target name such as
 * "sm_90a") with `sm_count` multiprocessors, e.g. to see on a build machine which instances an H200 would run
 * (`fa8 list --tuned --device sm_90a:132`). Nothing runs on that backend meanwhile (FA8_ERR_UNSUPPORTED).
 * Process-wide: set it before other calls, not concurrently with them. */
fa8_status fa8_plan_for_device(fa8_backend backend, const char *target, int32_t sm_count);
/* The shape bucket a problem falls in, as tables name it ("s<seq>_bh<bh>"): seq and bh are the powers of two
 * at or above max(seqlen_q, seqlen_k) and batch x heads. */
void fa8_tuning_bucket(const fa8_problem *p, int64_t *seq, int64_t *bh);
/* The generator hash of this build's kernels (changes whenever a template or the model does). */
const char *fa8_generator_hash(void);

#ifdef __cplusplus
}
#endif
#endif

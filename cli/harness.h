/* The attention harness shared by `fa8 probe`, `fa8 run` and the tests: owns the buffers of one problem,
 * quantizes FP32 inputs through fa8_quantize, runs fa8_forward/fa8_backward in a delta mode, and compares
 * against the FP64 references on the same dequantized inputs. */
#ifndef FA8_HARNESS_H
#define FA8_HARNESS_H

#include <stdint.h>
#include "fa8.h"

typedef struct {
  fa8_problem p;               /* geometry, causal, formats, backend, threads, and p.scale_rows: the quantizer's
                                  block rows for Q, K, V, dO (0: per-tensor), which dispatch queries assume too;
                                  p.delta is set per run */
  int32_t pow2_scales;
  int32_t quantize_off;        /* test-only: operands stay FP32 (the f32 pseudo-format), scales 1 */
  int32_t stats_off;           /* test-only: no row statistics, so the GPU runs its timed kernel variants */
  int32_t v_scale_rows;        /* V's block rows when > 0 (tests: finer than K's; probe/bench --v-scale-rows: one
                                  scale per head, say); else p.scale_rows */
} h_config;

typedef struct {
  h_config cfg;
  int64_t nq, nk, nv, no, nrow;            /* element counts: q, k, v, o/dO, rows (B*H*Sq) */
  float *q, *k, *v, *dout;                 /* FP32 inputs [B,S,heads,D] */
  void *q8, *k8, *v8, *do8;                /* quantized codes (float when quantize_off) */
  float *qs, *ks, *vs, *dos;               /* scales */
  float *qh, *kh, *vh, *doh;               /* dequantized operands (codes x scales) */
  uint16_t *o, *orem;                      /* BF16 outputs (FP32 data when quantize_off) */
  float *o32, *lse, *delta, *dq, *dk, *dv;
  fa8_rowsum_stats stats;
  void *ws;
  size_t ws_bytes;
  /* GPU backends: device copies (the host arrays above then hold what was downloaded) */
  struct {
    void *q, *k, *v, *dout;                       /* FP32 inputs */
    void *q8, *k8, *v8, *do8, *q8t, *k8t, *v8t, *do8t;
    float *qs, *ks, *vs, *dos;
    void *o, *orem, *o32, *lse, *delta, *dq, *dk, *dv, *ws, *qws;
    int on;
  } g;
} h_data;

/* The CLI commands' starting point: fa8_problem_init's problem, the library's default quantization
 * (fa8_quant_problem_init: power-of-two scales), the rest zero. Tests that memset an h_config get amax scales. */
void h_config_init(h_config *c);

/* Allocate for cfg (inputs zeroed; device buffers too when cfg->p.backend is a GPU). 0 ok, -1 out of memory. */
int h_alloc(h_data *d, const h_config *cfg);
void h_free(h_data *d);

/* Realistic inputs: Q/K with a few high-gain channels (as trained QK-norm models have) scaled to a target
 * logit standard deviation, V and dO with outlier channels too. Deterministic in seed. */
typedef struct {
  uint64_t seed;
  int outlier_channels;        /* high-gain channels in Q/K (and V, dO) */
  float outlier_gain;
  float logit_std;             /* standard deviation of c * q.k over random pairs */
} h_inputs;
void h_inputs_default(h_inputs *in);
void h_fill(h_data *d, const h_inputs *in);

/* Quantize q, k, v, dout (and build the dequantized copies). Returns fa8_status. */
/* V's quantization block rows: cfg->v_scale_rows when > 0, else p.scale_rows */
int32_t h_v_scale_rows(const h_config *cfg);
fa8_status h_quantize(h_data *d);
/* The problem and tensor views h_run uses (host or device buffers), for callers that time the calls. */
void h_views(h_data *d, fa8_delta_mode mode, fa8_problem *p, fa8_fwd_tensors *f, fa8_bwd_tensors *b);
/* h_views for timing (fa8 bench, fa8 tune): the forward writes what a training step asks for, O in BF16 (split: and
 * its remainder) and the LSE, without the FP32 copy of O that only the accuracy checks read (writing it cost the d128
 * forward 1.4 % and its causal run 2.7 % on an H100, bench/NOTES.md, 2026-12-06) */
void h_timed_views(h_data *d, fa8_delta_mode mode, fa8_problem *p, fa8_fwd_tensors *f, fa8_bwd_tensors *b);
/* Forward + backward in the given delta mode (stats collected). Returns fa8_status. */
fa8_status h_run(h_data *d, fa8_delta_mode mode);

/* Reference results (FP64) on the dequantized inputs; emulate: FP8-emulated flavour. 0 ok. */
typedef struct { double *o, *lse, *delta, *dq, *dk, *dv; } h_ref;
int h_reference(const h_data *d, int emulate, h_ref *out);
void h_ref_free(h_ref *r);

/* ||x - ref||_2 / ||ref||_2 (0 when both are 0). */
double h_rel_err_f32(const float *x, const double *ref, int64_t n);
double h_rel_err_bf16(const uint16_t *x, const double *ref, int64_t n);

const char *h_delta_name(fa8_delta_mode m);
int h_delta_from_name(const char *s, fa8_delta_mode *out);

#endif

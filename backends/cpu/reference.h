/* reference.h — untiled FP64 attention reference (forward + backward), two flavours.
 *
 * Plain: exact softmax attention in double. Emulated: the kernels' quantization points (P cast to
 * E4M3 with the fixed scale 2^8 for PV and dV; dS cast to ds_fmt with a power-of-two scale per
 * block_m x block_n tile), FP64 everywhere else. Comparing a kernel against both separates
 * quantization error from tiling / FP32-accumulation error (see docs/numerics.md).
 */
#ifndef FA8_REFERENCE_H
#define FA8_REFERENCE_H

#include "fa8_fp8.h"

typedef struct {
    int B, Sq, Sk, H, Hkv, Dqk, Dv; /* H % Hkv == 0; GQA group g = H/Hkv, query head h uses kv head h/g */
    int causal;                     /* bottom-right aligned: key j visible to query i iff j <= i + Sk - Sq */
    double scale;                   /* softmax scale c */
    /* inputs: values already dequantized (decoded FP8 operands times their scales), float,
     * layout [B,S,heads,D] contiguous */
    const float *q, *k, *v, *dout;
    /* FP8-emulated flavour: same quantization points as the kernels, FP64 everywhere else */
    int emulate;          /* 0: plain FP64 reference; 1: emulated */
    fa8_fmt ds_fmt;       /* format dS is cast to (emulated only); FA8_FMT_F32 = no cast */
    int block_m, block_n; /* tile for the dS tile scale (emulated only) */
    int nthreads;         /* >=1; pthreads over (b, kv head) */
    fa8_fmt p_fmt;        /* P's format (emulated only): fa8_p_format(qkv format); E4M3 when zero */
    int p_scale_log2;     /* P's fixed scale (emulated only): fa8_p_scale_log2(qkv format); 0 means 8 */
} fa8_ref_problem;

/* caller-allocated, layouts: o [B,Sq,H,Dv]; lse, delta [B,H,Sq]; dq [B,Sq,H,Dqk];
 * dk [B,Sk,Hkv,Dqk]; dv [B,Sk,Hkv,Dv]. lse is the natural log of sum exp(c*q.k). */
typedef struct {
    double *o, *lse, *delta, *dq, *dk, *dv;
} fa8_ref_out;

/* 0 ok; -1 on an invalid problem (non-positive sizes, H % Hkv != 0, null pointers, bad emulation
 * parameters, non-finite scale) or on allocation / thread failure. */
int fa8_reference(const fa8_ref_problem *p, fa8_ref_out *out);

#endif /* FA8_REFERENCE_H */

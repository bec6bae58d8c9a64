/* HIP tile operations for AMD CDNA (wave64, MFMA 32x32), used by the templates in templates/hip.
 *
 * Kernels are built header-free (clang -nogpuinc -nogpulib): no ROCm headers and no device libraries, so a
 * compiler that knows the target (clang >= 17 for gfx942) is all the build needs — Debian's device libraries
 * have no gfx942 file, and nothing here needs them. This header therefore spells out the few attributes,
 * work-item queries, barriers and float functions the kernels use, on clang builtins.
 *
 * The matrix instruction, per target (the arithmetic is docs/numerics.md's either way):
 *   gfx942 (CDNA3): v_mfma_f32_32x32x16_{fp8,bf8}_{fp8,bf8} on the FNUZ codes directly (fp8 = e4m3fnuz,
 *                   bf8 = e5m2fnuz), FP32 accumulate.
 *   gfx90a (CDNA2): no FP8 hardware: the codes are decoded exactly to FP16 (every e4m3fnuz / e5m2fnuz value is
 *                   an FP16 value) and issued as two v_mfma_f32_32x32x8f16, FP32 accumulate.
 * Fragment layouts of the 32x32 MFMA (l = lane 0..63): A (32 x 16): lane l holds row l%32, k 8(l/32)..+7 as
 * 8 bytes; B (16 x 32): lane l holds column l%32, the same k; C (32 x 32 f32, 16 per lane): element r of lane
 * l is row 8(r/4) + 4(l/32) + r%4, column l%32. Both operands are K-major, as on CUDA, so tiles live in LDS as
 * [rows][k] with FA8_PAD bytes of padding per row (64-bit loads of 32 consecutive rows spread over banks).
 * On gfx90a the K=16 step is two K=8 MFMAs over bytes 0-3 and 4-7 of each lane's 8: both operands permute k
 * the same way, so the sum covers the same 16 products. */
#ifndef FA8_HIP_TILE_H
#define FA8_HIP_TILE_H

#include <stdint.h>

#define __device__ __attribute__((device))
#define __host__ __attribute__((host))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define FA8_DEV __attribute__((device, always_inline)) inline
#define FA8_KERNEL(THREADS) extern "C" __global__ void __attribute__((amdgpu_flat_work_group_size(1, THREADS)))
#define INFINITY __builtin_inff()

FA8_DEV float exp2f(float x) { return __builtin_exp2f(x); }
FA8_DEV float log2f(float x) { return __builtin_log2f(x); }
FA8_DEV float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
FA8_DEV float fabsf(float x) { return __builtin_fabsf(x); }
FA8_DEV double fabs(double x) { return __builtin_fabs(x); }
FA8_DEV float ldexpf(float x, int e) { return __builtin_ldexpf(x, e); }
FA8_DEV bool fa8_isfinite(float x) { return __builtin_isfinite(x); }
template <class T> FA8_DEV T fa8_min(T a, T b) { return a < b ? a : b; }
template <class T> FA8_DEV T fa8_max(T a, T b) { return a > b ? a : b; }

#include "fa8_dev_common.h"

#define FA8_PAD 8   /* bytes of LDS padding per tile row */
#define FA8_WAVE 64

typedef float fa8_v16f __attribute__((ext_vector_type(16)));
typedef _Float16 fa8_v4h __attribute__((ext_vector_type(4)));

/* ---- work items ---- */
FA8_DEV int fa8_tid() { return (int)__builtin_amdgcn_workitem_id_x(); }
FA8_DEV int fa8_lane() { return fa8_tid() & (FA8_WAVE - 1); }
FA8_DEV int fa8_wave() { return fa8_tid() / FA8_WAVE; }
FA8_DEV int fa8_bx() { return (int)__builtin_amdgcn_workgroup_id_x(); }
FA8_DEV int fa8_by() { return (int)__builtin_amdgcn_workgroup_id_y(); }
FA8_DEV int fa8_bz() { return (int)__builtin_amdgcn_workgroup_id_z(); }
FA8_DEV int fa8_nbx() {   /* blocks along x (grid size / block size from the dispatch packet) */
  const uint16_t *dp = (const uint16_t *)__builtin_amdgcn_dispatch_ptr();
  const uint32_t *dp32 = (const uint32_t *)__builtin_amdgcn_dispatch_ptr();
  return (int)(dp32[3] / dp[2]);
}

/* block barrier with LDS visibility (what __syncthreads is) */
FA8_DEV void fa8_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
/* LDS written by other lanes of this wave becomes visible to it */
FA8_DEV void fa8_wave_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}

/* ---- cross-lane ---- */
FA8_DEV float fa8_shfl_xor(float x, int m) {
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute((fa8_lane() ^ m) << 2, __builtin_bit_cast(int, x)));
}
FA8_DEV double fa8_shfl_xor(double x, int m) {
  const uint64_t u = __builtin_bit_cast(uint64_t, x);
  const int addr = (fa8_lane() ^ m) << 2;
  const uint32_t lo = (uint32_t)__builtin_amdgcn_ds_bpermute(addr, (int)(uint32_t)u);
  const uint32_t hi = (uint32_t)__builtin_amdgcn_ds_bpermute(addr, (int)(uint32_t)(u >> 32));
  return __builtin_bit_cast(double, ((uint64_t)hi << 32) | lo);
}
/* over the 32 lanes that hold one row of a C fragment (lanes with the same l/32) */
FA8_DEV float fa8_row_max(float x) { for (int m = 16; m > 0; m >>= 1) x = fmaxf(x, fa8_shfl_xor(x, m)); return x; }
template <class T> FA8_DEV T fa8_row_sum(T x) { for (int m = 16; m > 0; m >>= 1) x += fa8_shfl_xor(x, m); return x; }
/* over the whole wave */
FA8_DEV float fa8_wave_max(float x) { for (int m = 32; m > 0; m >>= 1) x = fmaxf(x, fa8_shfl_xor(x, m)); return x; }
FA8_DEV float fa8_wave_sum(float x) { for (int m = 32; m > 0; m >>= 1) x += fa8_shfl_xor(x, m); return x; }

/* ---- global atomics (device scope) ---- */
FA8_DEV void fa8_atomic_add(float *p, float v) { __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); }
FA8_DEV void fa8_atomic_add(double *p, double v) { __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); }
FA8_DEV void fa8_atomic_max(uint32_t *p, uint32_t v) { __hip_atomic_fetch_max(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); }
FA8_DEV void fa8_atomic_or(uint32_t *p, uint32_t v) { __hip_atomic_fetch_or(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT); }

/* ---- C fragment coordinates ---- */
FA8_DEV int fa8_c_row(int r) { return 8 * (r >> 2) + 4 * (fa8_lane() >> 5) + (r & 3); }
FA8_DEV int fa8_c_col() { return fa8_lane() & 31; }

/* ---- conversions: the integer encoder of fa8_fp8.h (RNE, satfinite), the reference every backend matches;
 * the hardware v_cvt_pk_fp8_f32 is not used until its overflow behaviour is checked on a device ---- */
template <fa8_fmt F> FA8_DEV uint8_t fa8_cvt(float x) { return fa8_encode(F, x); }
template <fa8_fmt F> FA8_DEV float fa8_dec(uint8_t c) { return fa8_decode(F, c); }
template <fa8_fmt F> FA8_DEV float fa8_dec_stream(uint8_t c) { return fa8_decode(F, c); }   /* fa8_dev_common.h */

/* ---- matrix unit: acc += A (32 x 16) B (16 x 32), operands as 8 FP8 codes per lane ---- */
#if defined(__gfx942__) || defined(__gfx940__) || defined(__gfx941__)
#define FA8_MFMA_FP8 1
template <fa8_fmt A, fa8_fmt B> FA8_DEV void fa8_mfma(fa8_v16f &acc, uint64_t a, uint64_t b) {
  static_assert((A == FA8_FMT_E4M3FNUZ || A == FA8_FMT_E5M2FNUZ) && (B == FA8_FMT_E4M3FNUZ || B == FA8_FMT_E5M2FNUZ),
                "CDNA3 FP8 MFMA takes the FNUZ formats");
  const long la = (long)a, lb = (long)b;
  if (A == FA8_FMT_E4M3FNUZ && B == FA8_FMT_E4M3FNUZ) acc = __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(la, lb, acc, 0, 0, 0);
  else if (A == FA8_FMT_E4M3FNUZ) acc = __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8(la, lb, acc, 0, 0, 0);
  else if (B == FA8_FMT_E4M3FNUZ) acc = __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(la, lb, acc, 0, 0, 0);
  else acc = __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8(la, lb, acc, 0, 0, 0);
}
#elif defined(__gfx90a__)
#define FA8_MFMA_FP8 0
#include "fa8_fnuz_f16.h"
template <fa8_fmt F> FA8_DEV fa8_v4h fa8_to_f16x4(uint64_t v, int half) {
  fa8_v4h r;
#pragma unroll
  for (int i = 0; i < 4; ++i) r[i] = fa8_f16_of<F>((uint32_t)(v >> (8 * (4 * half + i))) & 0xFFu);
  return r;
}
template <fa8_fmt A, fa8_fmt B> FA8_DEV void fa8_mfma(fa8_v16f &acc, uint64_t a, uint64_t b) {
  acc = __builtin_amdgcn_mfma_f32_32x32x8f16(fa8_to_f16x4<A>(a, 0), fa8_to_f16x4<B>(b, 0), acc, 0, 0, 0);
  acc = __builtin_amdgcn_mfma_f32_32x32x8f16(fa8_to_f16x4<A>(a, 1), fa8_to_f16x4<B>(b, 1), acc, 0, 0, 0);
}
#elif defined(__HIP_DEVICE_COMPILE__)
#error "fa8 HIP kernels are built for gfx942 (FP8 MFMA) or gfx90a (FP16 MFMA)"
#endif

FA8_DEV fa8_v16f fa8_zero16() { fa8_v16f z = {}; return z; }

/* operand fragment of rows [r0, r0+32) and k [k0, k0+16) of an LDS [rows][ld] byte tile (A and B alike) */
FA8_DEV uint64_t fa8_frag(const uint8_t *s, int ld, int r0, int k0) {
  const int l = fa8_lane();
  return *(const uint64_t *)(s + (r0 + (l & 31)) * ld + k0 + 8 * (l >> 5));
}
/* one 32 x 32 chunk: acc += A[r0.., :K] B[n0.., :K]^t, K in 16-steps from 0 (the order matched delta and
 * backward share) */
template <fa8_fmt FA, fa8_fmt FB, int K>
FA8_DEV void fa8_mma_chunk(fa8_v16f &acc, const uint8_t *sa, int lda, int r0, const uint8_t *sb, int ldb, int n0) {
#pragma unroll
  for (int k = 0; k < K; k += 16) fa8_mfma<FA, FB>(acc, fa8_frag(sa, lda, r0, k), fa8_frag(sb, ldb, n0, k));
}

/* Raw S and dP^ accumulators of one 32 x 32 chunk (query rows r0.., keys n0..) from LDS tiles q [.][DQK+PAD],
 * dout [.][DV+PAD], k [.][DQK+PAD], v [.][DV+PAD]. The backward and the matched delta prep both call this on
 * that layout, so the delta is built from bit-identical P and dP^. */
template <fa8_fmt FMT, fa8_fmt FMT_GRAD, int DQK, int DV>
FA8_DEV void fa8_s_dp_chunk(fa8_v16f &sc, fa8_v16f &dp, const uint8_t *q, const uint8_t *dout, const uint8_t *k,
                            const uint8_t *v, int r0, int n0) {
  sc = fa8_zero16();
  dp = fa8_zero16();
  fa8_mma_chunk<FMT, FMT, DQK>(sc, q, DQK + FA8_PAD, r0, k, DQK + FA8_PAD, n0);
  fa8_mma_chunk<FMT_GRAD, FMT, DV>(dp, dout, DV + FA8_PAD, r0, v, DV + FA8_PAD, n0);
}

/* ---- LDS staging (plain loads: CDNA has no asynchronous copy to LDS for this) ---- */
/* rows [r0, r0+R) of a [.., S, .., D] FP8 tensor (row stride ss bytes) into LDS [R][D + PAD]; rows at or past
 * rend are zero */
template <int R, int D, int THREADS>
FA8_DEV void fa8_stage_rows(uint8_t *s, const uint8_t *g, int64_t ss, int r0, int rend) {
  constexpr int CH = D / 8;
  for (int i = fa8_tid(); i < R * CH; i += THREADS) {
    const int r = i / CH, c = i % CH;
    const uint64_t v = r0 + r < rend ? *(const uint64_t *)(g + (int64_t)(r0 + r) * ss + c * 8) : 0;
    *(uint64_t *)(s + r * (D + FA8_PAD) + c * 8) = v;
  }
}
/* columns [c0, c0+C) of a transposed [D][S_pad] slab (row stride sd bytes) into LDS [D][C + PAD]; columns
 * past cend (a multiple of 16, <= S_pad) are zero */
template <int D, int C, int THREADS>
FA8_DEV void fa8_stage_cols(uint8_t *s, const uint8_t *g, int64_t sd, int c0, int cend) {
  constexpr int CH = C / 8;
  for (int i = fa8_tid(); i < D * CH; i += THREADS) {
    const int d = i / CH, c = i % CH;
    const uint64_t v = c0 + c * 8 < cend ? *(const uint64_t *)(g + (int64_t)d * sd + c0 + c * 8) : 0;
    *(uint64_t *)(s + d * (C + FA8_PAD) + c * 8) = v;
  }
}

#endif

/* The delta modes that are row dot products (docs/numerics.md "Delta"): stale = rowsum(dO o O), dohat =
 * rowsum(dO^ o O), split = rowsum(dO^ o (O + R)). The per-element terms are those of
 * templates/common/fa8_dev_common.h (shared with HIP); used by every CUDA delta prep (templates/cuda/delta*.cu.tpl),
 * whatever pipeline its backward runs on. */
#ifndef FA8_CUDA_DELTA_ROWDOT_CUH
#define FA8_CUDA_DELTA_ROWDOT_CUH

#include "fa8_cuda_tile.cuh"

/* rows [r0, r1) of head h, batch b, one warp per row, one element per lane and step: any strides */
template <fa8_fmt FMT_GRAD, int DV, bool STALE, bool SPLIT>
__device__ __forceinline__ void fa8_delta_rowdot_scalar(const fa8_delta_args &a, int b, int h, int r0, int r1) {
  const int lane = threadIdx.x & 31;
  for (int i = r0 + (threadIdx.x >> 5); i < r1; i += blockDim.x / 32) {
    float sum = 0.0f;
    for (int k = lane; k < DV; k += 32) sum += fa8_delta_term<FMT_GRAD, STALE, SPLIT>(a, b, i, h, k);
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) a.delta.ptr[(int64_t)b * a.delta.sb + (int64_t)h * a.delta.sh + i] = fa8_delta_finish<STALE>(a, b, h, i, sum);
  }
}

/* the vector path's unit: 8 consecutive elements of a row (16-byte BF16 loads, 8 dO^ codes in one 8-byte load) */
constexpr int FA8_ROWDOT_VEC = 8;
__device__ __forceinline__ bool fa8_aligned_rows(const void *p, int64_t off, int64_t ss, int elem_bytes, int align) {
  return ((uintptr_t)p + off * elem_bytes) % align == 0 && (ss * elem_bytes) % align == 0;
}
/* every row of (b, h) that the vector path reads starts on its load width, whatever the row */
template <bool STALE, bool SPLIT>
__device__ __forceinline__ bool fa8_rowdot_vectorizable(const fa8_delta_args &a, int b, int h) {
  if (!fa8_aligned_rows(a.o.ptr, fa8_off(a.o.sb, 0, a.o.sh, b, 0, h), a.o.ss, 2, 16)) return false;
  if (STALE) {
    const int eb = a.dout_type == FA8_IN_BF16 ? 2 : 4;
    return fa8_aligned_rows(a.dout.ptr, fa8_off(a.dout.sb, 0, a.dout.sh, b, 0, h), a.dout.ss, eb, 16);
  }
  if (SPLIT && !fa8_aligned_rows(a.o_rem.ptr, fa8_off(a.o_rem.sb, 0, a.o_rem.sh, b, 0, h), a.o_rem.ss, 2, 16)) return false;
  return fa8_aligned_rows(a.do_hat.ptr, fa8_off(a.do_hat.sb, 0, a.do_hat.sh, b, 0, h), a.do_hat.ss, 1, 8);
}
__device__ __forceinline__ void fa8_bf16x8(const uint4 &w, float (&f)[8]) {
  const uint32_t u[4] = { w.x, w.y, w.z, w.w };
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = fa8_f32_from_bf16((uint16_t)u[i]);
    f[2 * i + 1] = fa8_f32_from_bf16((uint16_t)(u[i] >> 16));
  }
}
/* the dot of 8 elements at element column `col` of row i: fa8_delta_term's factors, accumulated by FMA */
template <fa8_fmt FMT_GRAD, bool STALE, bool SPLIT>
__device__ __forceinline__ float fa8_rowdot8(const fa8_delta_args &a, int b, int i, int h, int col) {
  float o[8], d[8];
  fa8_bf16x8(*reinterpret_cast<const uint4 *>((const uint16_t *)a.o.ptr + fa8_off(a.o.sb, a.o.ss, a.o.sh, b, i, h) + col), o);
  if (STALE) {
    const int64_t off = fa8_off(a.dout.sb, a.dout.ss, a.dout.sh, b, i, h) + col;
    if (a.dout_type == FA8_IN_BF16) {
      fa8_bf16x8(*reinterpret_cast<const uint4 *>((const uint16_t *)a.dout.ptr + off), d);
    } else {
      const float4 x = reinterpret_cast<const float4 *>((const float *)a.dout.ptr + off)[0];
      const float4 y = reinterpret_cast<const float4 *>((const float *)a.dout.ptr + off)[1];
      d[0] = x.x, d[1] = x.y, d[2] = x.z, d[3] = x.w, d[4] = y.x, d[5] = y.y, d[6] = y.z, d[7] = y.w;
    }
  } else {
    if (SPLIT) {
      float r[8];
      fa8_bf16x8(*reinterpret_cast<const uint4 *>((const uint16_t *)a.o_rem.ptr + fa8_off(a.o_rem.sb, a.o_rem.ss, a.o_rem.sh, b, i, h) + col), r);
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] += r[e];
    }
    const uint2 c = *reinterpret_cast<const uint2 *>((const uint8_t *)a.do_hat.ptr + fa8_off(a.do_hat.sb, a.do_hat.ss, a.do_hat.sh, b, i, h) + col);
    float lo[4], hi[4];
    fa8_dec4_stream<FMT_GRAD>(c.x, lo);
    fa8_dec4_stream<FMT_GRAD>(c.y, hi);
#pragma unroll
    for (int e = 0; e < 4; ++e) d[e] = lo[e], d[4 + e] = hi[e];
  }
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < 8; ++e) s = fmaf(d[e], o[e], s);
  return s;
}

/* rows [r0, r1) of head h, batch b, strided over the block's warps. Where every row of (b, h) is aligned for it,
 * L = DV/8 lanes (at most 32, a power of two) share a row with one 16-byte load of each BF16 operand per 8
 * elements, so a warp covers 32/L rows per step: the scalar path's 2-byte loads left split's pass (dO^, O and R)
 * 0.11 ms over stale's at d=128, S=8K (bench/NOTES.md). */
template <fa8_fmt FMT_GRAD, int DV, bool STALE, bool SPLIT>
__device__ __forceinline__ void fa8_delta_rowdot(const fa8_delta_args &a, int b, int h, int r0, int r1) {
  constexpr int UNITS = DV / FA8_ROWDOT_VEC;
  constexpr int L = UNITS >= 32 ? 32 : UNITS >= 16 ? 16 : UNITS >= 8 ? 8 : UNITS >= 4 ? 4 : UNITS >= 2 ? 2 : 1;
  constexpr int R = 32 / L;   /* rows per warp and step */
  if (DV % FA8_ROWDOT_VEC != 0 || !fa8_rowdot_vectorizable<STALE, SPLIT>(a, b, h)) {
    fa8_delta_rowdot_scalar<FMT_GRAD, DV, STALE, SPLIT>(a, b, h, r0, r1);
    return;
  }
  const int lane = threadIdx.x & 31, unit = lane % L, nw = blockDim.x / 32;
  /* the trip count is warp-uniform (the shuffles need every lane); a lane past r1 adds nothing */
  for (int i0 = r0 + (threadIdx.x >> 5) * R; i0 < r1; i0 += nw * R) {
    const int i = i0 + lane / L;
    float sum = 0.0f;
    if (i < r1)
#pragma unroll
      for (int u = unit; u < UNITS; u += L) sum += fa8_rowdot8<FMT_GRAD, STALE, SPLIT>(a, b, i, h, u * FA8_ROWDOT_VEC);
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (unit == 0 && i < r1) a.delta.ptr[(int64_t)b * a.delta.sb + (int64_t)h * a.delta.sh + i] = fa8_delta_finish<STALE>(a, b, h, i, sum);
  }
}

#endif

/* CUDA tile operations for the portable FP8 path (mma.sync m16n8k32, sm_89 and newer), used by the
 * templates in templates/cuda. The arithmetic is docs/numerics.md's; what differs from the CPU tile ops is
 * only the FP32 summation order inside the matrix unit.
 *
 * Fragment layouts of mma.m16n8k32 with 8-bit operands (g = lane / 4, t = lane % 4):
 *   A 16x32 row-major: a0 (row g, k 4t..4t+3), a1 (row g+8), a2 (row g, k 16+4t..), a3 (row g+8, k 16+4t..)
 *   B 32x8 "col":      b0 (k 4t..4t+3, col g), b1 (k 16+4t.., col g)
 *   C 16x8 f32:        c0,c1 (row g, cols 2t, 2t+1), c2,c3 (row g+8, same cols)
 * So A tiles live in shared memory as [rows][k] and B tiles as [n][k]: every operand is K-major, which is
 * why the quantizer writes transposed copies of Q, K, V and dO. Rows are padded by 16 bytes so the 8 rows a
 * fragment load touches fall in different banks. */
#ifndef FA8_CUDA_TILE_CUH
#define FA8_CUDA_TILE_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include "fa8_fp8.h"
#include "fa8_kernel_abi.h"
/* scale lookup, masking, softmax, dS, tile exponent, delta row terms: shared with the HIP kernels */
#define FA8_DEV __device__ __forceinline__
#include "fa8_dev_common.h"

#define FA8_PAD 16   /* bytes of padding per shared-memory row */

/* ---- matrix unit ---- */
template <fa8_fmt A, fa8_fmt B> struct fa8_mma;
#define FA8_MMA_SPEC(FA, FB, SA, SB)                                                                        \
  template <> struct fa8_mma<FA, FB> {                                                                      \
    static __device__ __forceinline__ void run(float c[4], const uint32_t a[4], const uint32_t b[2]) {     \
      asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." SA "." SB ".f32 "                              \
                   "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                                 \
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                          \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));                    \
    }                                                                                                       \
  };
FA8_MMA_SPEC(FA8_FMT_E4M3, FA8_FMT_E4M3, "e4m3", "e4m3")
FA8_MMA_SPEC(FA8_FMT_E4M3, FA8_FMT_E5M2, "e4m3", "e5m2")
FA8_MMA_SPEC(FA8_FMT_E5M2, FA8_FMT_E4M3, "e5m2", "e4m3")
FA8_MMA_SPEC(FA8_FMT_E5M2, FA8_FMT_E5M2, "e5m2", "e5m2")
#undef FA8_MMA_SPEC

/* Fragments come from shared memory through ldmatrix: viewing 4 FP8 bytes as two b16 halves, the b16 8x8
 * matrix layout (thread t of row-group g holds row g, columns 2t..2t+1) is exactly the FP8 fragment layout
 * (row g, bytes 4t..4t+3). Each lane supplies the address of one 16-byte row of one matrix. */
__device__ __forceinline__ uint32_t fa8_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* A fragment of rows [r0, r0+16) and k [k0, k0+32) of a [rows][ld] byte tile: matrices (rows 0-7, k 0-15),
 * (rows 8-15, k 0-15), (rows 0-7, k 16-31), (rows 8-15, k 16-31) -> a0..a3. */
__device__ __forceinline__ void fa8_load_a(uint32_t a[4], const uint8_t *s, int ld, int r0, int k0) {
  const int lane = threadIdx.x & 31;
  const uint8_t *p = s + (r0 + (lane & 15)) * ld + k0 + (lane >> 4) * 16;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(fa8_smem_addr(p)));
}
/* B fragment of columns [n0, n0+8) and k [k0, k0+32) of an [n][ld] byte tile: matrices (n 0-7, k 0-15) and
 * (n 0-7, k 16-31) -> b0, b1 (lanes 16-31 repeat lanes 0-15's addresses; x2 ignores them). */
__device__ __forceinline__ void fa8_load_b(uint32_t b[2], const uint8_t *s, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31;
  const uint8_t *p = s + (n0 + (lane & 7)) * ld + k0 + ((lane >> 3) & 1) * 16;
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(b[0]), "=r"(b[1]) : "r"(fa8_smem_addr(p)));
}

/* ---- conversions: hardware cvt with satfinite, bit-identical to fa8_encode (checked exhaustively) ---- */
template <fa8_fmt F> __device__ __forceinline__ uint8_t fa8_cvt(float x);
template <> __device__ __forceinline__ uint8_t fa8_cvt<FA8_FMT_E4M3>(float x) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return (uint8_t)(r & 0xFF);
}
template <> __device__ __forceinline__ uint8_t fa8_cvt<FA8_FMT_E5M2>(float x) {
  uint16_t r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return (uint8_t)(r & 0xFF);
}
/* two floats -> BF16 pair (lo in the low half), round to nearest even by the hardware: fa8_bf16_from_f32's bits
 * for every non-NaN value (a NaN gives the canonical NaN, where fa8_bf16_from_f32 keeps the payload) */
__device__ __forceinline__ uint32_t fa8_bf16x2_rn(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <fa8_fmt F> __device__ __forceinline__ float fa8_dec(uint8_t c) { return fa8_decode(F, c); }
/* fa8_dev_common.h's decode for streaming passes (the row-dot delta decodes every dO^ element): the OCP formats by
 * the hardware (sm_89+). Every e4m3 and e5m2 value is an f16 value, so the cvt to f16 and the widening are exact:
 * fa8_decode's value for every code (NaN codes give NaN), in 3 instructions where fa8_decode takes ~15 with
 * branches. Kept out of fa8_dec, whose other callers (the portable backward's diagnostics) spilled more with it. */
template <fa8_fmt F> __device__ __forceinline__ float fa8_dec_stream(uint8_t c) { return fa8_decode(F, c); }
template <> __device__ __forceinline__ float fa8_dec_stream<FA8_FMT_E4M3>(uint8_t c) {
  float f;
  asm("{\n.reg .b16 c, lo, hi;\n.reg .b32 h;\ncvt.u16.u32 c, %1;\ncvt.rn.f16x2.e4m3x2 h, c;\nmov.b32 {lo, hi}, h;\n"
      "cvt.f32.f16 %0, lo;\n}\n"
      : "=f"(f) : "r"((uint32_t)c));
  return f;
}
template <> __device__ __forceinline__ float fa8_dec_stream<FA8_FMT_E5M2>(uint8_t c) {
  float f;   /* e5m2 is the top byte of an f16 */
  asm("{\n.reg .b16 h;\ncvt.u16.u32 h, %1;\ncvt.f32.f16 %0, h;\n}\n" : "=f"(f) : "r"((uint32_t)c << 8));
  return f;
}
/* the four codes of a word (code i in byte i), the same exact decode two codes per instruction: the row-dot's
 * vector path */
template <fa8_fmt F> __device__ __forceinline__ void fa8_dec4_stream(uint32_t w, float (&f)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) f[i] = fa8_decode(F, (uint8_t)(w >> (8 * i)));
}
__device__ __forceinline__ void fa8_f16x2_to_f32(uint32_t h, float &lo, float &hi) {
  asm("{\n.reg .b16 l, u;\nmov.b32 {l, u}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, u;\n}\n" : "=f"(lo), "=f"(hi) : "r"(h));
}
/* four e4m3 codes (code i in byte i) -> two f16 pairs, exact: codes 0, 1 in h0, codes 2, 3 in h1; both 16-bit
 * halves of w go to the cvt as they are (no mask or shift extracts them) */
__device__ __forceinline__ void fa8_e4m3x4_to_f16x2(uint32_t w, uint32_t &h0, uint32_t &h1) {
  asm("{\n.reg .b16 l, u;\nmov.b32 {l, u}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, u;\n}\n"
      : "=r"(h0), "=r"(h1) : "r"(w));
}
template <> __device__ __forceinline__ void fa8_dec4_stream<FA8_FMT_E4M3>(uint32_t w, float (&f)[4]) {
  uint32_t h0, h1;
  fa8_e4m3x4_to_f16x2(w, h0, h1);
  fa8_f16x2_to_f32(h0, f[0], f[1]);
  fa8_f16x2_to_f32(h1, f[2], f[3]);
}
template <> __device__ __forceinline__ void fa8_dec4_stream<FA8_FMT_E5M2>(uint32_t w, float (&f)[4]) {
  /* each code becomes the top byte of an f16 */
  fa8_f16x2_to_f32(__byte_perm(w, 0u, 0x1404u), f[0], f[1]);
  fa8_f16x2_to_f32(__byte_perm(w, 0u, 0x3424u), f[2], f[3]);
}

/* ---- shared-memory staging ---- */
/* cp.async 16 bytes, zero-filled when !valid (tails past the sequence end). */
__device__ __forceinline__ void fa8_cp16(void *smem, const void *gmem, bool valid) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void fa8_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void fa8_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* rows [r0, r0+R) of a [.., S, .., D] FP8 tensor (row stride `ss` bytes) into smem [R][D + PAD]; rows at or
 * past `rend` are zero. */
template <int R, int D>
__device__ __forceinline__ void fa8_stage_rows(uint8_t *s, const uint8_t *g, int64_t ss, int r0, int rend) {
  constexpr int CH = D / 16;
  for (int i = threadIdx.x; i < R * CH; i += blockDim.x) {
    const int r = i / CH, c = i % CH;
    const bool ok = r0 + r < rend;
    fa8_cp16(s + r * (D + FA8_PAD) + c * 16, g + (ok ? (int64_t)(r0 + r) * ss : 0) + c * 16, ok);
  }
}
/* columns [c0, c0+C) of a transposed [D][S_pad] FP8 slab (row stride `sd` bytes) into smem [D][C + PAD];
 * columns past `cend` (>= S_pad, so never a partial 16-byte chunk past the allocation) are zero. */
template <int D, int C>
__device__ __forceinline__ void fa8_stage_cols(uint8_t *s, const uint8_t *g, int64_t sd, int c0, int cend) {
  constexpr int CH = C / 16;
  for (int i = threadIdx.x; i < D * CH; i += blockDim.x) {
    const int d = i / CH, c = i % CH;
    const bool ok = c0 + c * 16 < cend;
    fa8_cp16(s + d * (C + FA8_PAD) + c * 16, g + (int64_t)d * sd + (ok ? c0 + c * 16 : 0), ok);
  }
}

/* max / sum over the 4 threads that share a fragment row */
__device__ __forceinline__ float fa8_quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float fa8_quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* dQ is accumulated with atomics (or TMA reduces) by every backward: zero it first. The usual layout (a contiguous
 * [B, S, H, D] block) takes one memset, at the copy engine's write rate; other strides a kernel with a warp per row.
 * The element-wise kernel this replaced spent three 64-bit divisions (~100 instructions) on every float. Templates,
 * so that only the backwards that launch them compile them; static: one copy per instance object. */
template <int D>
static __global__ void fa8_zero_rows_kernel(fa8_ten dq, int S, int H, int64_t rows) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
  for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
    const int64_t h = r % H, s = (r / H) % S, b = r / H / S;
    float *row = (float *)dq.ptr + b * dq.sb + s * dq.ss + h * dq.sh;
    for (int d = lane; d < D; d += 32) row[d] = 0.0f;
  }
}
template <int D>
static inline int fa8_zero_rows(const fa8_ten &dq, int B, int S, int H, cudaStream_t st) {
  const int64_t rows = (int64_t)B * S * H;
  if (rows == 0) return 0;
  if (dq.sh == D && dq.ss == (int64_t)H * D && (B == 1 || dq.sb == (int64_t)S * H * D))
    return (int)cudaMemsetAsync(dq.ptr, 0, (size_t)rows * D * sizeof(float), st);
  fa8_zero_rows_kernel<D><<<(unsigned)(rows < 2048 ? (rows + 7) / 8 : 256), 256, 0, st>>>(dq, S, H, rows);
  return (int)cudaGetLastError();
}

#define FA8_CUDA_CHECK_LAUNCH() (cudaGetLastError() == cudaSuccess ? 0 : -1)

/* NAME_attrs (fa8_kernel_abi.h): registers and local memory per thread of a kernel, as the CUDA runtime reports
 * them */
template <typename K> inline int fa8_kernel_attrs(K *kernel, fa8_gpu_attrs *out) {
  cudaFuncAttributes fa;
  const cudaError_t e = cudaFuncGetAttributes(&fa, reinterpret_cast<const void *>(kernel));
  if (e != cudaSuccess) return (int)e;
  out->regs = fa.numRegs;
  out->local_bytes = (int32_t)fa.localSizeBytes;
  return 0;
}

#endif

/* Hopper (sm_90a) pieces the wgmma backward and its matched delta prep share, so that both recompute P^t and
 * dP^t with the same instructions in the same order (bit-identical values: docs/numerics.md "Delta"). Used by
 * templates/cuda/{bwd,delta}_wgmma.cu.tpl only.
 *
 * Orientation: a consumer warpgroup owns 64 keys and computes S^t = K Q^t and dP^t = V dO^t (M = 64 keys,
 * N = the query tile), so P^t and dS^t land in the accumulator layout that converts into the A operand of
 * dV += P^t dO and dK += dS^t Q without a transpose. */
#ifndef FA8_CUDA_SM90_BWD_CUH
#define FA8_CUDA_SM90_BWD_CUH

#include "fa8_cuda_sm90.cuh"

/* two FP8 codes of format F from (lo, hi), lo in the low byte */
template <fa8_fmt F> __device__ __forceinline__ uint32_t fa8_pack_x2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t fa8_pack_x2<FA8_FMT_E4M3>(float lo, float hi) { return fa8_pack_e4m3x2(lo, hi); }
template <> __device__ __forceinline__ uint32_t fa8_pack_x2<FA8_FMT_E5M2>(float lo, float hi) { return fa8_pack_e5m2x2(lo, hi); }

/* An m64nN FP32 accumulator (N/2 values per thread) -> FP8 A fragments of format F, one per 32-wide k-step
 * along N, each thread's own codes as they stand: the wgmma then reads A column 4t+i as accumulator column
 * 2t+i (i < 2) or 8+2t+i-2 of each 16, so the B operand must hold its K rows in that order
 * (fa8_keys_to_a_order, applied to Q^t and dO^t in shared memory by bwd_wgmma's producer warps). */
template <fa8_fmt F, int N>
__device__ __forceinline__ void fa8_acc_to_a(const float (&x)[N / 2], uint32_t (&af)[N / 32][4]) {
#pragma unroll
  for (int kb = 0; kb < N / 32; ++kb) {
    uint32_t w[2][2];
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c0 = 4 * kb + 2 * h;
        w[r][h] = fa8_pack_x2<F>(x[4 * c0 + 2 * r], x[4 * c0 + 2 * r + 1]) |
                  (fa8_pack_x2<F>(x[4 * (c0 + 1) + 2 * r], x[4 * (c0 + 1) + 2 * r + 1]) << 16);
      }
    fa8_codes_to_a<true>(w, af[kb]);
  }
}

/* Byte offset of (row, byte k) inside one [rows][64-byte] chunk written with the 64-byte swizzle (the layout
 * TMA's CU_TENSOR_MAP_SWIZZLE_64B produces and fa8_wgmma_desc reads): 16-byte unit bits 4-5 ^= bits 7-8. */
__device__ __forceinline__ int fa8_swz64(int row, int k) {
  const int off = row * FA8_CHUNK + k;
  return off ^ ((off & 0x180) >> 3);
}

/* Accumulator element i of an m64nN tile: row (within the warpgroup's 64) and column. */
__device__ __forceinline__ int fa8_acc_row(int i) { return ((threadIdx.x % 128) >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int fa8_acc_col(int i) { return (i >> 2) * 8 + 2 * (threadIdx.x & 3) + (i & 1); }

/* d (64 x N, FP32) (+)= A (smem) B (smem), one k-step of 32, A of format FA, B of format FB: the shapes of the
 * S^t and dP^t recomputation (N = the query columns one warpgroup recomputes: a 64-query tile, or its half in
 * the head-dim-split backward, bwd_wgmma_wide) and of the matched prep's S and dP^ (N = a key tile's 64 or 128
 * keys, delta_wgmma) */
template <fa8_fmt FA, fa8_fmt FB, int N> struct fa8_wgmma_ss_n;
#define FA8_WGMMA_SS_N64(FA, FB, TA, TB)                                                                       \
  template <> struct fa8_wgmma_ss_n<FA, FB, 64> {                                                            \
    static __device__ __forceinline__ void run(float (&d)[32], uint64_t da, uint64_t db, int accumulate) {   \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                              \
                   "wgmma.mma_async.sync.aligned.m64n64k32.f32." TA "." TB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n" \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
                   : "l"(da), "l"(db), "r"(accumulate));                                                     \
    }                                                                                                         \
  };
#define FA8_WGMMA_SS_N32(FA, FB, TA, TB)                                                                       \
  template <> struct fa8_wgmma_ss_n<FA, FB, 32> {                                                            \
    static __device__ __forceinline__ void run(float (&d)[16], uint64_t da, uint64_t db, int accumulate) {   \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                              \
                   "wgmma.mma_async.sync.aligned.m64n32k32.f32." TA "." TB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n" \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
                   : "l"(da), "l"(db), "r"(accumulate));                                                     \
    }                                                                                                         \
  };
#define FA8_WGMMA_SS_N128(FA, FB, TA, TB)                                                                      \
  template <> struct fa8_wgmma_ss_n<FA, FB, 128> {                                                           \
    static __device__ __forceinline__ void run(float (&d)[64], uint64_t da, uint64_t db, int accumulate) {   \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                              \
                   "wgmma.mma_async.sync.aligned.m64n128k32.f32." TA "." TB " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n" \
                   : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                   : "l"(da), "l"(db), "r"(accumulate));                                                     \
    }                                                                                                         \
  };
/* m64n128: the matched prep (delta_wgmma.cu.tpl) recomputes 64 queries x a 128-key tile in one instruction */
#define FA8_WGMMA_SS(FA, FB, TA, TB) FA8_WGMMA_SS_N64(FA, FB, TA, TB) FA8_WGMMA_SS_N32(FA, FB, TA, TB) FA8_WGMMA_SS_N128(FA, FB, TA, TB)
FA8_WGMMA_SS(FA8_FMT_E4M3, FA8_FMT_E4M3, "e4m3", "e4m3")
FA8_WGMMA_SS(FA8_FMT_E4M3, FA8_FMT_E5M2, "e4m3", "e5m2")
FA8_WGMMA_SS(FA8_FMT_E5M2, FA8_FMT_E4M3, "e5m2", "e4m3")
FA8_WGMMA_SS(FA8_FMT_E5M2, FA8_FMT_E5M2, "e5m2", "e5m2")
#undef FA8_WGMMA_SS
#undef FA8_WGMMA_SS_N32
#undef FA8_WGMMA_SS_N64
#undef FA8_WGMMA_SS_N128

/* d (64 x N) (+)= A B^t over K, in k32 steps over 64-byte swizzle chunks ([rows][64 B] each): A's 64 rows at a,
 * its chunks acs bytes apart; B's N rows at b, in chunks of BROWS rows (a row offset that is a multiple of 8 keeps
 * the 512-byte swizzle period). Issues only: the caller fences before and commits. The backward's S^t / dP^t
 * recompute and the matched prep's S / dP^ (delta_wgmma, queries as A) share it, so both issue the same FP8
 * products in the same k-order per element, which the GPU suite's pre-cast dS row sums (~1e-7 only if P and dP^
 * are the backward's bit for bit) confirm give the same sums in either orientation. */
template <fa8_fmt FA, fa8_fmt FB, int K, int N, int BROWS>
__device__ __forceinline__ void fa8_wgmma_ss_k(float (&d)[N / 2], const uint8_t *a, int acs, const uint8_t *b) {
  const uint32_t alo = fa8_wgmma_desc_lo(a), blo = fa8_wgmma_desc_lo(b);
#pragma unroll
  for (int kk = 0; kk < K / 32; ++kk)
    fa8_wgmma_ss_n<FA, FB, N>::run(d, fa8_wgmma_desc_at(alo, (kk / 2) * acs + (kk % 2) * 32),
                                   fa8_wgmma_desc_at(blo, (kk / 2) * BROWS * FA8_CHUNK + (kk % 2) * 32), kk > 0);
}

/* S^t = K Q^t and dP^t = V dO^t for 64 keys and N query columns: k, v point at the 64 key rows of the K / V chunks
 * (chunk stride kcs / vcs bytes), q, dout at the first of the N query rows in the query tile's chunks. The two
 * halves issue only: the caller fences before (once for both, when it issues them together) and commits.
 * QROWS: the query rows of one chunk of the q / dout buffers (64: one query tile) */
template <fa8_fmt FMT, int DQK, int N = 64, int QROWS = 64>
__device__ __forceinline__ void fa8_recompute_s_issue(float (&s)[N / 2], const uint8_t *k, int kcs, const uint8_t *q) {
  fa8_wgmma_ss_k<FMT, FMT, DQK, N, QROWS>(s, k, kcs, q);
}
template <fa8_fmt FMT, fa8_fmt FMT_GRAD, int DV, int N = 64, int QROWS = 64>
__device__ __forceinline__ void fa8_recompute_dp_issue(float (&dp)[N / 2], const uint8_t *v, int vcs, const uint8_t *dout) {
  fa8_wgmma_ss_k<FMT, FMT_GRAD, DV, N, QROWS>(dp, v, vcs, dout);
}
/* (the d <= 128 backward may issue the two halves in separate commit groups: the same instructions, so the same
 * sums) */
template <fa8_fmt FMT, fa8_fmt FMT_GRAD, int DQK, int DV, int N = 64, int QROWS = 64>
__device__ __forceinline__ void fa8_recompute_issue(float (&s)[N / 2], float (&dp)[N / 2], const uint8_t *k, int kcs,
                                                    const uint8_t *v, int vcs, const uint8_t *q, const uint8_t *dout) {
  fa8_wgmma_fence();
  fa8_recompute_s_issue<FMT, DQK, N, QROWS>(s, k, kcs, q);
  fa8_recompute_dp_issue<FMT, FMT_GRAD, DV, N, QROWS>(dp, v, vcs, dout);
  fa8_wgmma_commit();
}

/* Per-query row data of a 64-query tile, as both kernels read it: q and dO scales, delta, and lse2: the LSE in
 * log2 units less log2 of P's cast scale (fa8_lse2_row), so exp2(t - lse2) is P already scaled for its FP8 cast
 * (no multiply per element). qk: the logit factor (q scale x k scale x c log2 e), filled by the backward's
 * producer only (its K scale is one per CTA; the prep forms it per key tile). */
struct alignas(16) fa8_qrows {   /* aligned: 16-byte rows for the producers' stores and any vector reads */
  float qs[64], dos[64], lse2[64], delta[64], qk[64];
};
/* the lse2 entry of a row with saved LSE `lse` (natural log): one definition for both producers */
__device__ __forceinline__ float fa8_lse2_row(float lse, float p_scale_log2) { return lse * FA8_LOG2E - p_scale_log2; }
/* the logit factor of a row: q scale x (k scale x c log2 e), in this order in both kernels (the backward's
 * producer keeps one key factor for its CTA, the prep one per key tile) */
__device__ __forceinline__ float fa8_key_factor(float ks, float cl2e) { return ks * cl2e; }
__device__ __forceinline__ float fa8_logit_factor(float qs, float kc) { return qs * kc; }

/* P_ij (scaled by P's cast scale) and dP^_ij (scaled) from the recomputed accumulators, element i of this
 * thread: the backward's and the prep's arithmetic, one definition, so both see bit-identical values. mul: the
 * row's logit factor (fa8_logit_factor), lse2: its fa8_lse2_row, dsc: dO scale x V scale of the element. MASK:
 * the tile crosses a sequence end or the causal diagonal, so `vis` and an empty row (LSE -inf) are tested;
 * inside the mask every row has a visible key (finite LSE) and the element is one FFMA and one MUFU. exp2
 * flushes denormal results (ex2.approx.ftz): exp2f's denormal path costs a compare and two multiplies per
 * element, and no FP8 probability can hold a denormal. */
template <bool MASK = true>
__device__ __forceinline__ float fa8_p(float s, float mul, float lse2, bool vis) {
  const float e = fa8_exp2_ftz(fmaf(s, mul, -lse2));
  return MASK && (!vis || lse2 == -INFINITY) ? 0.0f : e;
}
template <bool MASK = true>
__device__ __forceinline__ void fa8_p_dp(float s, float d, float mul, float lse2, float dsc, bool vis, float &p, float &dpv) {
  p = fa8_p<MASK>(s, mul, lse2, vis);
  dpv = d * dsc;
}

/* The backward's dS step for one column pair of S^t / dP^t (queries ql, ql + 1 of row r, ql even: fa8_acc_col's
 * pairs), in place: s <- P, d <- dS = P (dP^ - delta). Q's and dO's scales, so the logit factor too, are one per
 * query tile (the dispatcher checks their scale rows against BLOCK_M): `mul` = r.qk[0] and `dsc` = r.dos[0] x the
 * key row's V scale, formed once a tile by the caller, the same products as per column; the pair's LSE and delta
 * come in one 8-byte load each. vis: the two elements' visibility (MASK only). */
template <bool MASK>
__device__ __forceinline__ void fa8_ds_pair(float &s0, float &s1, float &d0, float &d1, const fa8_qrows &r, int ql, float mul,
                                            float dsc, bool vis0, bool vis1) {
  const float2 l2 = *reinterpret_cast<const float2 *>(&r.lse2[ql]), dl = *reinterpret_cast<const float2 *>(&r.delta[ql]);
  float p, dpv;
  fa8_p_dp<MASK>(s0, d0, mul, l2.x, dsc, vis0, p, dpv);
  s0 = p;
  d0 = p * (dpv - dl.x);
  fa8_p_dp<MASK>(s1, d1, mul, l2.y, dsc, vis1, p, dpv);
  s1 = p;
  d1 = p * (dpv - dl.y);
}

#endif

/* The Hopper backwards' global-memory side, shared by templates/cuda/bwd_wgmma{,_wide}.cu.tpl: dQ added from a
 * consumer warpgroup's 64-query fragment (TMA reduce from swizzled shared memory, or FP32 atomics where dQ's
 * layout is not TMA-ready) and the host-side tensor maps of K, V, K^t, Q, dO, Q^t, dO^t and dQ.
 * Fragments are m64nNQ wgmma accumulators: a thread holds column pairs (c, c+1) of rows r and r+8. */
#ifndef FA8_CUDA_SM90_BWD_IO_CUH
#define FA8_CUDA_SM90_BWD_IO_CUH

#include "fa8_cuda_sm90_bwd.cuh"

/* dQ's column bound for the helpers below: a padded head dim's real columns (the rest is zeros, never stored), or
 * FA8_ALL_COLS where every column is real; each helper tests `DREAL >= FA8_ALL_COLS || col < DREAL` inline, which
 * folds away at compile time (the same test in a helper function moved ptxas's schedule: the d96 E5M2-gradient causal
 * backward's statistics variant spilled 4 bytes, H100 check-sass 2026-12-06) */
constexpr int FA8_ALL_COLS = 1 << 30;

/* dQ += a 64 x NQ fragment (already scaled by fq) at columns col0.., rows m0.., with the widest atomics the dQ
 * layout allows: sm_90 adds float2 / float4 in one RED, so the L2 sees 2-4x fewer atomic requests. For float4,
 * lanes 2k and 2k+1 swap pairs so the even lane owns columns c..c+3 of row r and the odd lane those of row r+8. */
template <int NQ, int DREAL = FA8_ALL_COLS>   /* DREAL: dQ's real columns (FA8_ALL_COLS: all) */
__device__ __forceinline__ void fa8_dq_add(const fa8_bwd_args &a, int vec, int b, int h, int m0, int col0, const float (&dq)[NQ / 2],
                                           float fq) {
  float *base = (float *)a.dq.ptr + (int64_t)b * a.dq.sb + (int64_t)h * a.dq.sh;
  const int lane = threadIdx.x & 31;
  if (vec == 4) {
    const bool odd = lane & 1;
#pragma unroll
    for (int i = 0; i < NQ / 2; i += 4) {
      /* mine: (r, c), (r, c+1), (r+8, c), (r+8, c+1) = dq[i .. i+3]; send the pair the partner lane keeps */
      const float s0 = odd ? dq[i] : dq[i + 2], s1 = odd ? dq[i + 1] : dq[i + 3];
      const float g0 = __shfl_xor_sync(0xffffffffu, s0, 1), g1 = __shfl_xor_sync(0xffffffffu, s1, 1);
      const int row = m0 + fa8_acc_row(odd ? i + 2 : i), col = col0 + fa8_acc_col(i) - (odd ? 2 : 0);
      const float4 v = odd ? make_float4(g0, g1, dq[i + 2], dq[i + 3]) : make_float4(dq[i], dq[i + 1], g0, g1);
      if (row < a.Sq && (DREAL >= FA8_ALL_COLS || col < DREAL))
        atomicAdd(reinterpret_cast<float4 *>(base + (int64_t)row * a.dq.ss + col),
                  make_float4(v.x * fq, v.y * fq, v.z * fq, v.w * fq));
    }
  } else if (vec == 2) {
#pragma unroll
    for (int i = 0; i < NQ / 2; i += 2) {
      const int row = m0 + fa8_acc_row(i), col = col0 + fa8_acc_col(i);
      if (row < a.Sq && (DREAL >= FA8_ALL_COLS || col < DREAL)) atomicAdd(reinterpret_cast<float2 *>(base + (int64_t)row * a.dq.ss + col), make_float2(dq[i] * fq, dq[i + 1] * fq));
    }
  } else {
#pragma unroll
    for (int i = 0; i < NQ / 2; ++i) {
      const int row = m0 + fa8_acc_row(i), col = col0 + fa8_acc_col(i);
      if (row < a.Sq && (DREAL >= FA8_ALL_COLS || col < DREAL)) atomicAdd(base + (int64_t)row * a.dq.ss + col, dq[i] * fq);
    }
  }
}

/* dQ += a 64 x NQ fragment (NQ a multiple of 32) through shared memory: every thread of the warpgroup writes its
 * (row, column pair) values into the NQ / 32 128-byte-swizzled [64][32-float] slabs at `stage` (1024-byte
 * aligned; two wavefronts per 8-byte store), the warpgroup syncs on named barrier `bar`, and its first thread
 * issues the TMA reduce-adds (rows past Sq are clipped by the tensor map) as one bulk group
 * (fa8_dq_stage_add = fa8_dq_stage_write, fence, barrier, fa8_dq_stage_issue; the d <= 128 backward writes with
 * fa8_dq_stage_write_stm instead and issues apart, with its own barriers between). The caller waits for the group's read before it writes the buffer again.
 * Against the float4 atomics (ncu: 19 % of the backward's stall samples) this is NQ/4 shared stores per thread. */
template <int NQ>
__device__ __forceinline__ void fa8_dq_stage_write(float *stage, const float (&dq)[NQ / 2], float fq) {
#pragma unroll
  for (int i = 0; i < NQ / 2; i += 2) {
    const int row = fa8_acc_row(i), col = fa8_acc_col(i);
    float2 *dst = reinterpret_cast<float2 *>(reinterpret_cast<uint8_t *>(stage + (col / 32) * 64 * 32) + fa8_swz128(row, (col % 32) * 4));
    *dst = make_float2(dq[i] * fq, dq[i + 1] * fq);
  }
}
/* The same slabs written by stmatrix (NQ / 8 stores a thread instead of NQ / 4), for a fragment whose columns come
 * out of its GEMM in the order (0, 4, 1, 5, 2, 6, 3, 7) of each 8 (its B operand's rows permuted so, fa8_stm_row_of):
 * a thread's even and odd columns of a row are then element t of two 4-float rows, which is what stmatrix's b16
 * pairs hold (one FP32 per pair, no transpose); lane l gives the address of row l % 8 of matrix l / 8. */
template <int NQ>
__device__ __forceinline__ void fa8_dq_stage_write_stm(float *stage, const float (&dq)[NQ / 2], float fq) {
  const int lane = threadIdx.x & 31, m = lane >> 3;
  const int row = ((threadIdx.x % 128) >> 5) * 16 + (lane & 7) + 8 * (m >> 1);
#pragma unroll
  for (int j = 0; j < NQ / 8; ++j) {
    const int col = 8 * j + 4 * (m & 1);
    const uint32_t addr = fa8_smem_addr(reinterpret_cast<uint8_t *>(stage + (col / 32) * 64 * 32) + fa8_swz128(row, (col % 32) * 4));
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(__float_as_uint(dq[4 * j] * fq)), "r"(__float_as_uint(dq[4 * j + 1] * fq)),
                 "r"(__float_as_uint(dq[4 * j + 2] * fq)), "r"(__float_as_uint(dq[4 * j + 3] * fq))
                 : "memory");
  }
}
/* the source row, within its group of 8, of B operand row n for fa8_dq_stage_write_stm's column order */
__device__ __forceinline__ constexpr int fa8_stm_row_of(int n) { return (n & 1) * 4 + (n >> 1); }
/* the warpgroup's first thread, once every writer of `stage` has fenced its stores and passed a barrier with it:
 * the TMA reduce-adds of the NQ / 32 slabs as one bulk group */
template <int NQ, int DREAL = FA8_ALL_COLS>   /* DREAL: dQ's real columns; a slab wholly past them is not issued */
__device__ __forceinline__ void fa8_dq_stage_issue(const float *stage, const CUtensorMap *map, int b, int h, int m0, int col0) {
#pragma unroll
  for (int sl = 0; sl < NQ / 32; ++sl)
    if (DREAL >= FA8_ALL_COLS || col0 + sl * 32 < DREAL) fa8_tma_reduce_add(map, stage + sl * 64 * 32, col0 + sl * 32, m0, h, b);
  fa8_bulk_commit();
}
template <int NQ>
__device__ __forceinline__ void fa8_dq_stage_add(float *stage, const CUtensorMap *map, int b, int h, int m0, int col0,
                                                 const float (&dq)[NQ / 2], float fq, int bar) {
  fa8_dq_stage_write<NQ>(stage, dq, fq);
  fa8_fence_async_smem();
  fa8_named_sync(bar, 128);
  if (threadIdx.x % 128 == 0) fa8_dq_stage_issue<NQ>(stage, map, b, h, m0, col0);
}

/* ---- host ---- */
/* The backward's tensor maps and dQ path: K, V boxes of BN key rows; K^t of DQK rows (a BN-key chunk); Q, dO
 * boxes of BM query rows; Q^t, dO^t of DQK / DV rows (a BM-query chunk); dQ (FP32, [32 floats][BM rows]) when
 * it is TMA-ready and the kernel stages dQ (dq_staged). */
struct fa8_bwd_maps {
  CUtensorMap tk, tv, tkt, tq, tdo, tqt, tdot, tdq;
  int dq_vec;   /* 4: dQ rows 16-byte aligned (float4 atomics), 2: 8-byte (float2), 1: scalar */
  int dq_tma;   /* dQ added by TMA reduce from shared memory (tdq valid); else atomics of dq_vec's width */
};
static inline int fa8_bwd_maps_init(fa8_bwd_maps &m, const fa8_bwd_args &a, int DQK, int DV, int BM, int BN, bool dq_staged,
                                    int DQK_REAL = 0, int DV_REAL = 0) {
  /* the tensors' real head dims (0: DQK, DV); the boxes cover the padded DQK, DV, TMA zero-fills the rest */
  const uint64_t rqk = (uint64_t)(DQK_REAL ? DQK_REAL : DQK), rv = (uint64_t)(DV_REAL ? DV_REAL : DV);
  const uint64_t sqp = (uint64_t)(a.Sq + 15) / 16 * 16, skp = (uint64_t)(a.Sk + 15) / 16 * 16;
  /* row layouts [B, S, heads, D] and transposed copies [B, heads, D, S padded to 16]: dims innermost first */
  const uint64_t dk_[4] = { rqk, (uint64_t)a.Sk, (uint64_t)a.Hkv, (uint64_t)a.B };
  const uint64_t sk_[3] = { (uint64_t)a.k.ss, (uint64_t)a.k.sh, (uint64_t)a.k.sb };
  const uint64_t dv_[4] = { rv, (uint64_t)a.Sk, (uint64_t)a.Hkv, (uint64_t)a.B };
  const uint64_t sv_[3] = { (uint64_t)a.v.ss, (uint64_t)a.v.sh, (uint64_t)a.v.sb };
  const uint64_t dkt[4] = { skp, rqk, (uint64_t)a.Hkv, (uint64_t)a.B };
  const uint64_t skt[3] = { (uint64_t)a.kt.sd, (uint64_t)a.kt.sh, (uint64_t)a.kt.sb };
  const uint64_t dq_[4] = { rqk, (uint64_t)a.Sq, (uint64_t)a.H, (uint64_t)a.B };
  const uint64_t sq_[3] = { (uint64_t)a.q.ss, (uint64_t)a.q.sh, (uint64_t)a.q.sb };
  const uint64_t ddo[4] = { rv, (uint64_t)a.Sq, (uint64_t)a.H, (uint64_t)a.B };
  const uint64_t sdo[3] = { (uint64_t)a.do_hat.ss, (uint64_t)a.do_hat.sh, (uint64_t)a.do_hat.sb };
  const uint64_t dqt[4] = { sqp, rqk, (uint64_t)a.H, (uint64_t)a.B };
  const uint64_t sqt[3] = { (uint64_t)a.qt.sd, (uint64_t)a.qt.sh, (uint64_t)a.qt.sb };
  const uint64_t ddt[4] = { sqp, rv, (uint64_t)a.H, (uint64_t)a.B };
  const uint64_t sdt[3] = { (uint64_t)a.dot.sd, (uint64_t)a.dot.sh, (uint64_t)a.dot.sb };
  int e = fa8_tma_map(&m.tk, a.k.ptr, dk_, sk_, BN);
  if (!e) e = fa8_tma_map(&m.tv, a.v.ptr, dv_, sv_, BN);
  if (!e) e = fa8_tma_map(&m.tkt, a.kt.ptr, dkt, skt, DQK);
  if (!e) e = fa8_tma_map(&m.tq, a.q.ptr, dq_, sq_, BM);
  if (!e) e = fa8_tma_map(&m.tdo, a.do_hat.ptr, ddo, sdo, BM);
  if (!e) e = fa8_tma_map(&m.tqt, a.qt.ptr, dqt, sqt, DQK);
  if (!e) e = fa8_tma_map(&m.tdot, a.dot.ptr, ddt, sdt, DV);
  if (e) return e;
  /* the widest dQ atomics the layout allows (element strides and the base in bytes) */
  const uintptr_t dqa = (uintptr_t)a.dq.ptr;
  const int64_t st_or = a.dq.ss | a.dq.sh | a.dq.sb;
  m.dq_vec = (dqa % 16 == 0 && st_or % 4 == 0) ? 4 : (dqa % 8 == 0 && st_or % 2 == 0) ? 2 : 1;
  /* TMA needs a 16-byte aligned base and strides: the float4 condition; a map the driver refuses falls back */
  m.dq_tma = 0;
  if (dq_staged && m.dq_vec == 4) {
    const uint64_t ddq[4] = { rqk, (uint64_t)a.Sq, (uint64_t)a.H, (uint64_t)a.B };
    const uint64_t sdq[3] = { (uint64_t)a.dq.ss * 4, (uint64_t)a.dq.sh * 4, (uint64_t)a.dq.sb * 4 };
    m.dq_tma = fa8_tma_map_f32(&m.tdq, a.dq.ptr, ddq, sdq, BM) == 0;
  }
  return 0;
}

/* ---- the last wave of a non-causal grid (fa8_tail_split, fa8_cuda_sm90.cuh) ----
 * The chunks of a split key tile add their dK/dV partial sums with FP32 atomics into rows zeroed first
 * (fa8_zero_split_tiles): like dQ's, their summation order is then not fixed. */
/* zeroes the dK and dV rows of the split key tiles (one block per tile), before the chunks add to them */
template <int BN, int DK, int DV>
static __global__ void fa8_zero_split_tiles(fa8_ten dk, fa8_ten dv, int first, int nkt, int Hkv, int Sk) {
  const int lin = first + blockIdx.x, kt = lin % nkt, kh = (lin / nkt) % Hkv, b = lin / nkt / Hkv;
  const int rows = min(BN, Sk - kt * BN);
  for (int i = threadIdx.x; i < rows * (DK + DV); i += blockDim.x) {
    const int r = i / (DK + DV), c = i % (DK + DV);
    const fa8_ten &t = c < DK ? dk : dv;
    ((float *)t.ptr)[(int64_t)b * t.sb + (int64_t)(kt * BN + r) * t.ss + (int64_t)kh * t.sh + (c < DK ? c : c - DK)] = 0.0f;
  }
}
/* ---- query heads per CTA of a causal GQA grid (the config's qheads, gen/fa8/schema.lua) ----
 * The CTAs each (kv head, key tile) gets: 1 for qheads 0 (the whole group) or a group of at most qheads; else the
 * group over its largest divisor not above qheads. With more than one, the CTAs add their dK/dV shares with FP32
 * atomics into rows zeroed first (fa8_bwd_zero_keys), like a split tail's chunks. */
static inline int fa8_bwd_head_split(int group, int qheads, int hkv) {
  if (qheads <= 0 || qheads >= group) return 1;
  int q = qheads;
  while (group % q) --q;
  return (int64_t)hkv * (group / q) <= 65535 ? group / q : 1;   /* the grid's y: kv heads x CTAs per head */
}
/* zeroes the dK and dV rows of the key tiles from linear index first on (one block per tile; first 0: all of them),
 * stream-ordered before the CTAs that add to them */
template <int BN, int DK, int DV>
static inline int fa8_bwd_zero_keys(const fa8_bwd_args &a, int first, cudaStream_t st) {
  const int nkt = (a.Sk + BN - 1) / BN, n = nkt * a.Hkv * a.B - first;
  if (n <= 0) return 0;
  fa8_zero_split_tiles<BN, DK, DV><<<n, 256, 0, st>>>(a.dk, a.dv, first, nkt, a.Hkv, a.Sk);
  return (int)cudaGetLastError();
}
/* the plan's launches: zero the split tiles' dK/dV rows (stream-ordered before the backward) */
template <int BN, int DK, int DV>
static inline int fa8_bwd_split_prepare(const fa8_tail_split &sp, const fa8_bwd_args &a, cudaStream_t st) {
  return sp.chunks < 2 ? 0 : fa8_bwd_zero_keys<BN, DK, DV>(a, sp.first, st);
}

#endif

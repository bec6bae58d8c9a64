/* Hopper (sm_90a) building blocks of the fast path: TMA tile loads completing on mbarriers, wgmma FP8 with
 * shared-memory descriptors, warpgroup register reallocation. Used by templates/cuda/*_wgmma.cu.tpl only.
 *
 * Shared-memory operand layout. Every operand tile is K-major and stored as chunks of [rows][64 bytes], each
 * chunk written by one TMA box with the 64-byte swizzle, which wgmma reads back through a descriptor with the
 * same swizzle mode: no bank conflicts, no in-kernel transposes (K-major copies come from the quantizer). A
 * wgmma k-step of an FP8 operand covers 32 bytes, half a chunk row. Chunks are 1024-byte aligned. */
#ifndef FA8_CUDA_SM90_CUH
#define FA8_CUDA_SM90_CUH

#include <cuda.h>
#include <limits.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include "fa8_cuda_tile.cuh"

#define FA8_CHUNK 64   /* bytes of K per swizzle chunk (CU_TENSOR_MAP_SWIZZLE_64B) */

/* The kernel's shared-memory struct at the dynamic shared-memory base rounded up to 1024 bytes (what the
 * swizzled TMA chunks need). The offset is added to the __shared__ array itself, not through an integer cast:
 * the compiler then still knows the pointer is shared, so the row data the consumers read per element loads with
 * LDS instead of generic LD.E through the L1TEX path (the backward had 62 of those per tile). */
template <class T> __device__ __forceinline__ T &fa8_smem_struct(uint8_t *raw) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(raw);
  return *reinterpret_cast<T *>(__builtin_assume_aligned(raw + ((1024u - (a & 1023u)) & 1023u), 1024));
}

/* This thread's warpgroup, through a shuffle so that the compiler knows it is warp-uniform: what a kernel derives
 * from it (tile rows, mask tests, shared-memory descriptors) stays in uniform registers, without divergence
 * barriers around branches on it or R2UR copies for the wgmma descriptors (d128 forward: 495 -> 478 SASS
 * instructions a key tile, -2.0 % time) */
__device__ __forceinline__ int fa8_warpgroup_index() { return __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0); }

/* ---- mbarriers ---- */
__device__ __forceinline__ void fa8_mbar_init(uint64_t *b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(fa8_smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void fa8_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void fa8_mbar_expect_tx(uint64_t *b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(fa8_smem_addr(b)), "r"(bytes) : "memory");
}
/* an arrive on the barrier at shared address b (a caller can derive it once, outside a loop) */
__device__ __forceinline__ void fa8_mbar_arrive_at(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b) : "memory");
}
__device__ __forceinline__ void fa8_mbar_arrive(uint64_t *b) { fa8_mbar_arrive_at(fa8_smem_addr(b)); }
/* Wait until the barrier's phase with this parity has completed. */
__device__ __forceinline__ void fa8_mbar_wait(uint64_t *b, unsigned parity) {
  asm volatile("{\n.reg .pred done;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n}\n" ::"r"(fa8_smem_addr(b)), "r"(parity) : "memory");
}

/* ---- causal launch order ---- */
/* Which (tile, head) a CTA of a causal grid (tiles, heads, batch) takes. The hardware starts CTAs in linear
 * order; a grid walked tile-major per head ends on some head's longest tiles (a GQA backward CTA carries a whole
 * query-head group: its longest tile is 1/8 of an SM's share at S=8K). Here, within chunks of 8 (head, batch)
 * pairs, every head's longest tile goes first and the shortest last (longest-processing-time first), so the grid
 * ends on short tiles, while the CTAs that run together still share a few heads' K/V (or Q/dO) in L2.
 * rank: 0 = the tile with the most work; head and batch index the grid's y and z. */
__device__ __forceinline__ void fa8_lpt_tile(int &rank, int &head, int &batch) {
  constexpr int CHUNK = 8;
  const int nt = gridDim.x, nh = gridDim.y * gridDim.z;
  const int lin = blockIdx.x + nt * (blockIdx.y + gridDim.y * blockIdx.z);
  const int c0 = lin / (CHUNK * nt) * CHUNK, cn = min(CHUNK, nh - c0), r = lin - c0 * nt;
  const int hb = c0 + r % cn;   /* head + heads x batch */
  rank = r / cn;
  head = hb % gridDim.y;
  batch = hb / gridDim.y;
}

/* The order for a persistent grid (fwd_wgmma.cu.tpl, causal): position lin of the sequence over nt query tiles
 * and nh (head, batch) pairs. A persistent CTA c walks lin = c, c + G, c + 2G, ... (G CTAs): static round-robin.
 * Chunks of 8 pairs as fa8_lpt_tile, but every other chunk, counted back from the last, runs shortest first (the
 * last chunk stays longest first), so a CTA's positions in neighbouring chunks pair long tiles with short ones.
 * Measured on the H200 (d128 causal S=8K, 2026-11-30): 1.645/1.653 ms against 1.683/1.720 for round-robin over
 * fa8_lpt_tile's plain order, as the schedule model predicted (bench/experiments/wgmma-fwd-persistent-causal.md). */
__device__ __forceinline__ void fa8_lpt_at(int lin, int nt, int nh, int &rank, int &hb) {
  constexpr int CHUNK = 8;
  const int ci = lin / (CHUNK * nt), c0 = ci * CHUNK, cn = min(CHUNK, nh - c0), r = lin - c0 * nt;
  rank = r / cn;
  hb = c0 + r % cn;
  if (((nh + CHUNK - 1) / CHUNK - 1 - ci) & 1) rank = nt - 1 - rank;
}

/* ---- TMA ---- */
/* One box of a 4-D tensor map into shared memory; completion (bytes) is signalled on `bar`. */
__device__ __forceinline__ void fa8_tma_load(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
               ::"r"(fa8_smem_addr(dst)), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(fa8_smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void fa8_tma_prefetch_desc(const CUtensorMap *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

/* ---- the last wave of a non-causal grid ----
 * A non-causal grid of one CTA per tile (the backward: key tile, kv head, batch) gives every CTA the same work.
 * Where the last wave would run r <= SMs / 2 of them while the other SMs idle, those r tiles are split along their
 * sequence (the backward's (query head, query tile) items) into `chunks` CTAs each (r x chunks <= SMs); the kernel
 * joins their partial sums. B x H = 64, S = 8K, 128-key tiles: 4096 CTAs on 132 SMs are 31 full waves and 4 CTAs,
 * 3 % of the time, which become 4 x 33 chunks (measured: bench/results/2026-11-30-h200-ca7d0d5). A grid under one
 * wave is all last wave and splits the same way: one kv head at S = 8K (tensor parallelism's 8/1) is 64 CTAs, 1.9x
 * faster as 128 chunks, and 16/2 at S = 2K 2.9x (bench/results/2026-12-04-h200-small-grid-split). The matched prep
 * split the same way (key-tile chunks, partial sums joined by the last chunk in stream-ordered scratch) measured
 * 3-7 % slower and was not kept. Causal grids run longest first (fa8_lpt_tile): their last CTAs are the short ones,
 * so they are never split. */
struct fa8_tail_split {
  int first;    /* CTAs from this linear index on are chunks of the tiles first, first + 1, ... */
  int chunks;   /* chunks per split tile (1: none) */
};
/* the plan for `tiles` CTAs of `seq` sequence items each; grid: the CTAs to launch (1-D, in the order of the
 * unsplit grid: its x fastest). Needs no split where the device's SM count is unknown. */
static inline int fa8_tail_split_plan(fa8_tail_split &sp, int64_t tiles, int seq, unsigned &grid) {
  sp.first = tiles < INT_MAX ? (int)tiles : INT_MAX;
  sp.chunks = 1;
  grid = (unsigned)tiles;
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return (int)e;
  /* a grid under one wave is all last wave: its tiles split too (B x Hkv = 1 x 1 at S=8K is 64 CTAs for 132 SMs) */
  const int64_t r = sms <= 0 ? 0 : tiles < sms ? tiles : tiles % sms;
  if (r == 0) return 0;
  const int64_t chunks = sms / r < seq ? sms / r : seq;
  if (chunks < 2) return 0;
  sp.first = (int)(tiles - r);
  sp.chunks = (int)chunks;
  grid = (unsigned)(tiles - r + r * chunks);
  return 0;
}
/* this CTA's tile (its linear index in the unsplit grid) and its chunk (-1: the whole sequence) */
__device__ __forceinline__ int fa8_tail_split_tile(const fa8_tail_split &sp, int &chunk) {
  int lin = blockIdx.x;
  chunk = -1;
  if (lin >= sp.first) {
    chunk = (lin - sp.first) % sp.chunks;
    lin = sp.first + (lin - sp.first) / sp.chunks;
  }
  return lin;
}
/* the items [lo, hi) of a sequence of `total` that chunk takes (chunk -1: all) */
__device__ __forceinline__ void fa8_tail_split_range(const fa8_tail_split &sp, int chunk, int total, int &lo, int &hi) {
  lo = chunk < 0 ? 0 : (int)((int64_t)total * chunk / sp.chunks);
  hi = chunk < 0 ? total : (int)((int64_t)total * (chunk + 1) / sp.chunks);
}

/* ---- wgmma ---- */
/* Descriptor of a K-major operand in 64-byte-swizzled chunks: 8-row groups 512 bytes apart (stride byte
 * offset); the leading byte offset is unused for swizzled K-major operands. */
/* low word: address field (bits 0-13, address / 16) and leading byte offset 1; high word: stride byte offset and
 * the 64-byte swizzle mode */
__device__ __forceinline__ uint32_t fa8_wgmma_desc_lo(const void *smem) { return ((fa8_smem_addr(smem) & 0x3FFFF) >> 4) | (1u << 16); }
constexpr uint32_t FA8_WGMMA_DESC_HI = (uint32_t)(8 * FA8_CHUNK >> 4) | (2u << 30);
/* the descriptor of (the operand whose fa8_wgmma_desc_lo is lo) + off bytes, off a multiple of 16: the same bits as
 * fa8_wgmma_desc(smem + off), since the 14-bit address field cannot carry (shared memory is under 256 KB). With off
 * a constant of an unrolled k-loop this is one add per wgmma operand, where re-deriving the descriptor from each
 * address cost ptxas a mask, a shift and an or per operand inside the issue sequence. */
__device__ __forceinline__ uint64_t fa8_wgmma_desc_at(uint32_t lo, uint32_t off) {
  return ((uint64_t)FA8_WGMMA_DESC_HI << 32) | (lo + (off >> 4));
}
__device__ __forceinline__ uint64_t fa8_wgmma_desc(const void *smem) { return fa8_wgmma_desc_at(fa8_wgmma_desc_lo(smem), 0); }
__device__ __forceinline__ void fa8_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void fa8_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void fa8_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Pin accumulator registers at this point of the program: the compiler must not move their reads or writes
 * across the asynchronous wgmma that owns them. */
template <int N> __device__ __forceinline__ void fa8_fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

template <int N, int M> __device__ __forceinline__ void fa8_fence_regs_u(uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

/* ---- named barriers (id 0 is __syncthreads) ---- */
__device__ __forceinline__ void fa8_named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void fa8_named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/* ---- warpgroup register reallocation ---- */
template <int R> __device__ __forceinline__ void fa8_regs_release() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void fa8_regs_claim() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
/* x as a value the compiler cannot see through: a count formed from it inside each role (after the setmaxnreg fork)
 * is recomputed there instead of carried across the fork, where the producer's few registers spilled it */
__device__ __forceinline__ int fa8_after_fork(int x) {
  asm volatile("" : "+r"(x));
  return x;
}
/* setmaxnreg moves registers inside the CTA's launch allocation (THREADS x the per-thread count the launch bounds
 * allow, in steps of 8), not the register file: what the consumers claim must be what the producer warpgroup
 * gives up, or their setmaxnreg.inc waits forever (a producer at 32 next to two consumers at 240 hung the GPU
 * suite, bench/NOTES.md). */
template <int THREADS, int PRODUCER, int CONSUMER> constexpr bool fa8_regs_fit() {
  return 128 * PRODUCER + (THREADS - 128) * CONSUMER <= THREADS * ((65536 / THREADS) / 8 * 8);
}

/* 2^x with denormal results flushed to zero: one MUFU.EX2. exp2f adds a range test and two multiplies per call
 * to produce denormal results, which no probability stored in FP8 (or summed into l) can use. */
__device__ __forceinline__ float fa8_exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* The warp's largest of non-negative, non-NaN floats (a dS tile's |dS| maxima): their bits order as unsigned
 * integers, so one REDUX replaces five dependent shuffle-and-max rounds on the backward's path to its GEMMs. */
__device__ __forceinline__ float fa8_warp_max_nonneg(float x) {
  return __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(x)));
}

/* Generic-proxy shared-memory writes become visible to the async proxy (wgmma operands). */
__device__ __forceinline__ void fa8_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/* ---- P in registers as the A operand ----
 * The accumulator of S holds, per thread, columns 2t, 2t+1 of each 8-column chunk (rows g and g+8); the FP8
 * A fragment wants columns 4t..4t+3 and 16+4t..16+4t+3 of each 32-column block. Pack the codes per chunk
 * pair and fetch the two halves each thread needs from its quad neighbours 2(t&1) and 2(t&1)+1. */
__device__ __forceinline__ uint32_t fa8_pack_e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ uint32_t fa8_pack_e5m2x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
/* split's remainder codes of two values under P's scale (fa8_split_rem_scaled): e5m2(f16(ps) - P^) for the pair
 * (lo, hi), P^ as the f16 pair the e4m3 codes decode to (fa8_e4m3x4_to_f16x2). The FP16 difference is exact, so
 * these are fa8_fp8.h's codes; three instructions a pair */
__device__ __forceinline__ uint32_t fa8_split_rem_e5m2x2(float lo, float hi, uint32_t p_hat_f16x2) {
  uint32_t p16, r16;
  uint16_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(p16) : "f"(hi), "f"(lo));
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(r16) : "r"(p16), "r"(p_hat_f16x2));
  asm("cvt.rn.satfinite.e5m2x2.f16x2 %0, %1;" : "=h"(r) : "r"(r16));
  return r;
}
/* Keys of a B operand (V^t rows, K-major) in the order a thread's own accumulator codes take as an A fragment:
 * position 4t+i of each 16-key group holds key 2t+i (i < 2) or 8+2t+i-2, so the codes of chunks 0,1 of a
 * thread (x01 below) are its a0 as they stand. The permutation stays inside 16-byte units, so it commutes with
 * the 64-byte swizzle: one unit in, the same unit out. */
__device__ __forceinline__ uint4 fa8_keys_to_a_order(uint4 w) {
  uint4 n;
  n.x = __byte_perm(w.x, w.z, 0x5410u);
  n.y = __byte_perm(w.x, w.z, 0x7632u);
  n.z = __byte_perm(w.y, w.w, 0x5410u);
  n.w = __byte_perm(w.y, w.w, 0x7632u);
  return n;
}
/* 16 bytes of shared memory at a 32-bit shared address */
__device__ __forceinline__ uint4 fa8_lds128(uint32_t addr) {
  uint4 w;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w) : "r"(addr));
  return w;
}
__device__ __forceinline__ void fa8_sts128(uint32_t addr, uint4 w) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(w.x), "r"(w.y), "r"(w.z), "r"(w.w) : "memory");
}
/* One 16-byte unit of shared memory (32-bit shared address) put in the A order in place (fa8_keys_to_a_order):
 * the forward's V^t keys (vperm) and the backward's Q^t / dO^t query columns. */
__device__ __forceinline__ void fa8_unit_to_a_order(uint32_t addr) { fa8_sts128(addr, fa8_keys_to_a_order(fa8_lds128(addr))); }
/* x01: codes of chunks 0,1 (low, high half), x23: chunks 2,3, for one row; returns a0/a2 (or a1/a3). */
__device__ __forceinline__ void fa8_quad_to_a(uint32_t x01, uint32_t x23, uint32_t &lo, uint32_t &hi) {
  const int lane = threadIdx.x & 31, t = lane & 3;
  const int s1 = (lane & ~3) | (2 * (t & 1)), s2 = s1 + 1;
  const uint32_t sel = (t >> 1) ? 0x7632u : 0x5410u;
  const uint32_t a = __shfl_sync(0xffffffffu, x01, s1), b = __shfl_sync(0xffffffffu, x01, s2);
  const uint32_t c = __shfl_sync(0xffffffffu, x23, s1), d = __shfl_sync(0xffffffffu, x23, s2);
  lo = __byte_perm(a, b, sel);
  hi = __byte_perm(c, d, sel);
}
/* One 32-wide k-step's A fragment from a thread's packed codes x[row][chunk pair] (row g, g+8; chunks 0,1 and
 * 2,3). OWN: the B operand's K rows are in the A order (fa8_keys_to_a_order), so the thread's own codes are its
 * fragment as they stand; otherwise they move across the quad (fa8_quad_to_a). */
template <bool OWN>
__device__ __forceinline__ void fa8_codes_to_a(const uint32_t (&x)[2][2], uint32_t (&af)[4]) {
  if constexpr (OWN) {
    af[0] = x[0][0]; af[2] = x[0][1];
    af[1] = x[1][0]; af[3] = x[1][1];
  } else {
    fa8_quad_to_a(x[0][0], x[0][1], af[0], af[2]);
    fa8_quad_to_a(x[1][0], x[1][1], af[1], af[3]);
  }
}

/* ---- TMA reduce (shared -> global add), bulk groups ---- */
/* global += one box of shared memory (the map's element type, FP32 here), tracked by this thread's bulk group */
__device__ __forceinline__ void fa8_tma_reduce_add(const CUtensorMap *map, const void *src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               ::"l"((uint64_t)map), "r"(fa8_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
/* global = one box of shared memory (TMA store), tracked by this thread's bulk group */
__device__ __forceinline__ void fa8_tma_store(const CUtensorMap *map, const void *src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
               ::"l"((uint64_t)map), "r"(fa8_smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
__device__ __forceinline__ void fa8_bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/* at most N of this thread's bulk groups still read their shared-memory source */
template <int N> __device__ __forceinline__ void fa8_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void fa8_bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"); }

/* Byte offset of (row, byte k) in a [rows][128-byte] box written with the 128-byte swizzle (TMA's
 * CU_TENSOR_MAP_SWIZZLE_128B): 16-byte unit bits 4-6 ^= row bits 0-2. */
__device__ __forceinline__ int fa8_swz128(int row, int k) { return row * 128 + (k ^ ((row & 7) << 4)); }

/* ---- host: persistent grids ---- */
/* CTAs a persistent grid of `kernel` launches at most: SMs x resident CTAs per SM (occupancy at this block size and
 * dynamic shared memory, which the caller has already allowed with cudaFuncSetAttribute), asked once per device and
 * cached per kernel (the cache is this function's static, one per instantiation). Returns 0 or a cudaError_t code. */
#define FA8_MAX_DEVICES 64
template <class K> static inline int fa8_resident_ctas(K kernel, int threads, size_t smem, int *ctas) {
  static int cache[FA8_MAX_DEVICES];   /* 0: not asked yet */
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return (int)e;
  const bool cached = dev >= 0 && dev < FA8_MAX_DEVICES;
  if (cached && (*ctas = __atomic_load_n(&cache[dev], __ATOMIC_RELAXED)) > 0) return 0;
  int sms = 0, per_sm = 0;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) return (int)e;
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem)) != cudaSuccess) return (int)e;
  if (sms * per_sm <= 0) return (int)cudaErrorLaunchOutOfResources;   /* the kernel does not fit an SM */
  *ctas = sms * per_sm;
  if (cached) __atomic_store_n(&cache[dev], *ctas, __ATOMIC_RELAXED);
  return 0;
}

/* ---- host: tensor maps ---- */
/* A 4-D tensor map (dims innermost first, byte strides of dims 1..3) with boxes of [inner][rows]. Returns 0 or
 * a cudaError_t code. */
static inline int fa8_tma_encode(CUtensorMap *map, CUtensorMapDataType type, const void *base, const uint64_t dims[4],
                                 const uint64_t strides[3], uint32_t inner, uint32_t rows, CUtensorMapSwizzle swizzle) {
  typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static encode_fn encode = nullptr;
  if (!encode) {
    cudaDriverEntryPointQueryResult q;
    void *fn = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
      return (int)cudaErrorNotSupported;
    encode = (encode_fn)fn;
  }
  const cuuint64_t gd[4] = { dims[0], dims[1], dims[2], dims[3] };
  const cuuint64_t gs[3] = { strides[0], strides[1], strides[2] };
  const cuuint32_t box[4] = { inner, rows, 1, 1 }, es[4] = { 1, 1, 1, 1 };
  const CUresult r = encode(map, type, 4, const_cast<void *>(base), gd, gs, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : (int)cudaErrorInvalidValue;
}
/* FP8 operands: boxes of [FA8_CHUNK][rows] bytes, 64-byte swizzle */
static inline int fa8_tma_map(CUtensorMap *map, const void *base, const uint64_t dims[4], const uint64_t strides[3],
                              uint32_t rows) {
  return fa8_tma_encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, dims, strides, FA8_CHUNK, rows, CU_TENSOR_MAP_SWIZZLE_64B);
}
/* BF16 outputs (the forward's O): boxes of [64 elements][rows], 128-byte swizzle */
static inline int fa8_tma_map_bf16(CUtensorMap *map, const void *base, const uint64_t dims[4], const uint64_t strides[3],
                                   uint32_t rows) {
  return fa8_tma_encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, dims, strides, 64, rows, CU_TENSOR_MAP_SWIZZLE_128B);
}
/* FP32 (dQ's reduce target): boxes of [32 floats][rows], 128-byte swizzle */
static inline int fa8_tma_map_f32(CUtensorMap *map, const void *base, const uint64_t dims[4], const uint64_t strides[3],
                                  uint32_t rows) {
  return fa8_tma_encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, dims, strides, 32, rows, CU_TENSOR_MAP_SWIZZLE_128B);
}

#endif

/* The delta modes that are row dot products (docs/numerics.md "Delta"): stale = rowsum(dO o O), dohat =
 * rowsum(dO^ o O), split = rowsum(dO^ o (O + R)). One warp per query row, the per-element terms from
 * templates/common/fa8_dev_common.h (shared with HIP); used by every CUDA delta prep (templates/cuda/delta*.cu.tpl),
 * whatever pipeline its backward runs on. */
#ifndef FA8_CUDA_DELTA_ROWDOT_CUH
#define FA8_CUDA_DELTA_ROWDOT_CUH

#include "fa8_cuda_tile.cuh"

/* rows [r0, r1) of head h, batch b, strided over the block's warps */
template <fa8_fmt FMT_GRAD, int DV, bool STALE, bool SPLIT>
__device__ __forceinline__ void fa8_delta_rowdot(const fa8_delta_args &a, int b, int h, int r0, int r1) {
  const int lane = threadIdx.x & 31;
  for (int i = r0 + (threadIdx.x >> 5); i < r1; i += blockDim.x / 32) {
    float sum = 0.0f;
    for (int k = lane; k < DV; k += 32) sum += fa8_delta_term<FMT_GRAD, STALE, SPLIT>(a, b, i, h, k);
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) a.delta.ptr[(int64_t)b * a.delta.sb + (int64_t)h * a.delta.sh + i] = fa8_delta_finish<STALE>(a, b, h, i, sum);
  }
}

#endif

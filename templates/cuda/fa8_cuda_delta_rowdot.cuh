/* The delta modes that are row dot products (docs/numerics.md "Delta"): stale = rowsum(dO o O), dohat =
 * rowsum(dO^ o O), split = rowsum(dO^ o (O + R)). One warp per query row; shared by every CUDA delta prep
 * (templates/cuda/delta*.cu.tpl), whatever pipeline its backward runs on. */
#ifndef FA8_CUDA_DELTA_ROWDOT_CUH
#define FA8_CUDA_DELTA_ROWDOT_CUH

#include "fa8_cuda_tile.cuh"

/* rows [r0, r1) of head h, batch b, strided over the block's warps */
template <fa8_fmt FMT_GRAD, int DV, bool STALE, bool SPLIT>
__device__ __forceinline__ void fa8_delta_rowdot(const fa8_delta_args &a, int b, int h, int r0, int r1) {
  const int lane = threadIdx.x & 31;
  for (int i = r0 + (threadIdx.x >> 5); i < r1; i += blockDim.x / 32) {
    const uint16_t *o = (const uint16_t *)a.o.ptr + (int64_t)b * a.o.sb + (int64_t)i * a.o.ss + (int64_t)h * a.o.sh;
    float sum = 0.0f;
    if (STALE) {
      const bool bf = a.dout_type == FA8_IN_BF16;
      const char *d = (const char *)a.dout.ptr + ((int64_t)b * a.dout.sb + (int64_t)i * a.dout.ss + (int64_t)h * a.dout.sh) * (bf ? 2 : 4);
      for (int k = lane; k < DV; k += 32)
        sum += (bf ? fa8_f32_from_bf16(((const uint16_t *)d)[k]) : ((const float *)d)[k]) * fa8_f32_from_bf16(o[k]);
    } else {
      const uint8_t *d = (const uint8_t *)a.do_hat.ptr + (int64_t)b * a.do_hat.sb + (int64_t)i * a.do_hat.ss + (int64_t)h * a.do_hat.sh;
      const uint16_t *orem = SPLIT ? (const uint16_t *)a.o_rem.ptr + (int64_t)b * a.o_rem.sb + (int64_t)i * a.o_rem.ss + (int64_t)h * a.o_rem.sh : nullptr;
      for (int k = lane; k < DV; k += 32) {
        const float ov = SPLIT ? fa8_f32_from_bf16(o[k]) + fa8_f32_from_bf16(orem[k]) : fa8_f32_from_bf16(o[k]);
        sum += fa8_dec<FMT_GRAD>(d[k]) * ov;
      }
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (!STALE) sum *= fa8_scale_at(a.do_scale, b, h, i);
    if (lane == 0) a.delta.ptr[(int64_t)b * a.delta.sb + (int64_t)h * a.delta.sh + i] = sum;
  }
}

#endif

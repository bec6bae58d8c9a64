// Issue rate of sm_90's three-input integer max (VIMNMX3, DPX) against FMNMX, per SM sub-partition:
// 8 independent chains per thread, N dependent steps each, one warp per SMSP (4 warps a block, one block) and
// then 12 warps (3 per SMSP, as the forward's consumers). Prints cycles per warp instruction on one SMSP.
// Build and run on the GPU machine: nvcc -arch=sm_90a -O3 -o /tmp/mm bench/experiments/minmax-rate.cu && /tmp/mm
#include <cstdio>
#include <cuda_runtime.h>
constexpr int N = 4096;
template <int OP> __global__ void k(const int *in, int *out, long long *cyc) {
  int v[8];
  for (int c = 0; c < 8; ++c) v[c] = in[threadIdx.x * 8 + c];
  const int a = in[1000], b = in[1001];
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 16
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      /* volatile asm for FMNMX: a max with loop-invariant operands is idempotent and the compiler folds fmaxf
       * (it keeps the DPX intrinsic: check the SASS for 16 x 8 VIMNMX3 a loop body) */
      if (OP == 0) v[c] = __vimax3_s32(v[c], a + c, b);
      else if (OP == 1) asm volatile("max.f32 %0, %0, %1;" : "+r"(v[c]) : "r"(a + c));
      else asm volatile("max.f32 %0, %0, %1;\n\tmax.f32 %0, %0, %2;" : "+r"(v[c]) : "r"(a + c), "r"(b));
    }
  const long long t1 = clock64();
  int s = 0;
  for (int c = 0; c < 8; ++c) s ^= v[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}
template <int OP> void run(const char *name, int warps) {
  int *in, *out;
  long long *cyc, h;
  cudaMalloc(&in, 1 << 20); cudaMemset(in, 1, 1 << 20);
  cudaMalloc(&out, 1 << 20); cudaMalloc(&cyc, 8);
  k<OP><<<1, 32 * warps>>>(in, out, cyc);
  k<OP><<<1, 32 * warps>>>(in, out, cyc);
  cudaMemcpy(&h, cyc, 8, cudaMemcpyDeviceToHost);
  const double instr_per_smsp = (double)N * 8 * (OP == 2 ? 2 : 1) * (warps / 4.0);
  printf("%-22s %2d warps: %.2f cycles per warp instruction per SMSP (%s)\n", name, warps, h / instr_per_smsp,
         cudaGetErrorString(cudaGetLastError()));
  cudaFree(in); cudaFree(out); cudaFree(cyc);
}
int main() {
  for (int w : {4, 12, 16}) {
    run<0>("VIMNMX3", w);
    run<1>("FMNMX", w);
    run<2>("FMNMX (two per step)", w);
  }
  return 0;
}

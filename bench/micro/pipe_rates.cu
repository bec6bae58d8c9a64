/* Issue rates of the instructions the wgmma softmax is made of, per SM and clock, on the GPU it runs on.
 * Why: the forward's per-tile model (bench/NOTES.md) rests on MUFU.EX2 taking 16 lanes a clock per SM, the rate
 * ptxas schedules by, and on the FP8 pack (F2FP) running elsewhere. Neither was measured here; this measures both,
 * and whether the two share a pipe (their mix takes the sum of their times if they do, the larger if not).
 * Build and run (the device): meson builds it as BUILD/pipe_rates wherever sm_90a kernels are built, or
 * nvcc -arch=sm_90a -O3 -o /tmp/pipe_rates bench/micro/pipe_rates.cu && /tmp/pipe_rates
 * Each kernel runs CHAINS independent dependency chains per thread in one block of 32 warps per SM (8 per
 * scheduler, all resident at once, so that the block's clock64 span is the SM's), so latency hides and the pipe's
 * rate shows. A chain step that needs a helper instruction to stay dependent (the
 * pack's 16-bit result fed back as a float) uses an FADD, whose FMA pipe is 8x faster than the rates in
 * question; the FFMA line measures that pipe on its own. Output: one line per kernel, warp instructions of the
 * measured kind per SM per clock (clock64 cycles of each block, averaged), lanes per SM per clock, and the clock those
 * cycles imply over the launch's elapsed time (a check: far below the SM clock means the blocks did not all run at
 * once). A first version with two blocks of 16 warps per SM read MUFU 33 % fast by clock64 and its clocks 1.4-1.5 GHz
 * against the 1.98 GHz nvidia-smi showed: the blocks' spans did not overlap fully. */
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int CHAINS = 8, ITERS = 4096, THREADS = 1024;

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(-x));
  return y;
}
__device__ __forceinline__ float pack_step(float x, float y) {   /* F2FP e4m3x2 from two f32, fed back by an FADD */
  uint16_t h;
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(h) : "f"(x), "f"(y));
  return __int_as_float((uint32_t)h) + 1.0f;
}
__device__ __forceinline__ float unpack_step(float x) {   /* e4m3x2 -> f16x2 (F2FP.F16.E4M3.UNPACK_B), fed back */
  uint32_t r;
  asm volatile("{\n.reg .b16 lo;\ncvt.u16.u32 lo, %1;\ncvt.rn.f16x2.e4m3x2 %0, lo;\n}" : "=r"(r) : "r"(__float_as_uint(x)));
  return __uint_as_float(r) + 1.0f;
}
__device__ __forceinline__ float h2f_step(float x) {   /* f16 -> f32 (HADD2.F32), fed back */
  float y;
  asm volatile("{\n.reg .b16 lo;\ncvt.u16.u32 lo, %1;\ncvt.f32.f16 %0, lo;\n}" : "=f"(y) : "r"(__float_as_uint(x)));
  return y + 1.0f;
}

/* the half-precision exponentials: is MUFU.EX2.F16 (one half, SASS) faster than the FP32 one? ex2.approx.f16x2
 * compiles to two MUFU.EX2.F16 and a PRMT on sm_90 (nvcc 13), so only a faster F16 rate could make a packed
 * softmax pay; the chain keeps its value in the low half, fed back through the same register */
__device__ __forceinline__ float ex2h_step(float x) {
  uint32_t r;
  asm volatile("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %1;\nex2.approx.f16 lo, lo;\nmov.b32 %0, {lo, hi};\n}" : "=r"(r) : "r"(__float_as_uint(x)));
  return __uint_as_float(r);
}
__device__ __forceinline__ float ex2h2_step(float x) {   /* ex2.approx.f16x2: two values a PTX instruction */
  uint32_t r;
  asm volatile("ex2.approx.f16x2 %0, %1;" : "=r"(r) : "r"(__float_as_uint(x)));
  return __uint_as_float(r);
}
__device__ __forceinline__ float fmnmx_step(float x, float y) {   /* FMNMX: volatile, so the idempotent max stays */
  float r;
  asm volatile("max.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(y));
  return r;
}

enum Kind { FFMA, MUFU, PACK, MUFU_PACK, UNPACK, H2F, MUFU_UNPACK, MUFU_F16, MUFU_F16X2, MUFU_MUFU_F16, FMNMX, MUFU_FMNMX };
static const char *kNames[] = { "ffma", "mufu.ex2", "f2fp pack e4m3x2", "mufu + pack (1:1)", "f2fp unpack e4m3x2->f16x2",
                                "f16->f32 (hadd2.f32)", "mufu + unpack (1:1)", "mufu.ex2.f16 (one half)",
                                "ex2.approx.f16x2 (PTX ops)", "mufu f32 + f16 (1:1)", "fmnmx", "mufu + fmnmx (1:1)" };

template <Kind K>
__global__ void __launch_bounds__(THREADS) rate_kernel(float *out, long long *cycles) {
  float v[CHAINS], w[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) { v[c] = 0.25f + 0.01f * (threadIdx.x + c); w[c] = 0.5f + 0.001f * c; }
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 1
  for (int i = 0; i < ITERS; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      if constexpr (K == FFMA) v[c] = fmaf(v[c], 0.999f, w[c]);
      if constexpr (K == MUFU) v[c] = ex2(v[c]);
      if constexpr (K == PACK) v[c] = pack_step(v[c], w[c]);
      if constexpr (K == MUFU_PACK) { v[c] = ex2(v[c]); w[c] = pack_step(w[c], v[c]); }
      if constexpr (K == UNPACK) v[c] = unpack_step(v[c]);
      if constexpr (K == H2F) v[c] = h2f_step(v[c]);
      if constexpr (K == MUFU_UNPACK) { v[c] = ex2(v[c]); w[c] = unpack_step(w[c]); }
      if constexpr (K == MUFU_F16) v[c] = ex2h_step(v[c]);
      if constexpr (K == MUFU_F16X2) v[c] = ex2h2_step(v[c]);
      if constexpr (K == MUFU_MUFU_F16) { v[c] = ex2(v[c]); w[c] = ex2h_step(w[c]); }
      if constexpr (K == FMNMX) v[c] = fmnmx_step(v[c], w[c]);
      if constexpr (K == MUFU_FMNMX) { v[c] = ex2(v[c]); w[c] = fmnmx_step(w[c], v[c]); }
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += v[c] + w[c];
  out[blockIdx.x * THREADS + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <Kind K>
static void measure(int sms, float *out, long long *cyc, long long *hcyc) {
  const int blocks = sms;   /* one block of 32 warps per SM, 8 per scheduler */
  rate_kernel<K><<<blocks, THREADS>>>(out, cyc);   /* warm-up */
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  rate_kernel<K><<<blocks, THREADS>>>(out, cyc);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, a, b);
  cudaMemcpy(hcyc, cyc, blocks * sizeof(long long), cudaMemcpyDeviceToHost);
  double mean = 0.0;
  for (int i = 0; i < blocks; ++i) mean += (double)hcyc[i] / blocks;
  const int per_step = (K == MUFU_PACK || K == MUFU_UNPACK || K == MUFU_MUFU_F16 || K == MUFU_FMNMX) ? 2 : 1;   /* measured instructions per chain step */
  /* warp instructions of the measured kinds per SM: one block of THREADS / 32 warps x CHAINS x ITERS x per_step */
  const double winstr = (double)(THREADS / 32) * CHAINS * (double)ITERS * per_step;
  const double rate = winstr / mean;
  printf("%-28s %7.3f warp-instr/SM/clk  %6.1f lanes/SM/clk  (%.0f cycles, %.3f ms, clock %.0f MHz)\n", kNames[K], rate,
         32.0 * rate, mean, ms, mean / (ms * 1e3));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
}

int main() {
  int dev = 0, sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  float *out;
  long long *cyc, *hcyc = new long long[sms];
  if (cudaMalloc(&out, sms * THREADS * sizeof(float)) != cudaSuccess || cudaMalloc(&cyc, sms * sizeof(long long)) != cudaSuccess) {
    fprintf(stderr, "pipe_rates: cudaMalloc failed\n");
    return 1;
  }
  measure<FFMA>(sms, out, cyc, hcyc);
  measure<MUFU>(sms, out, cyc, hcyc);
  measure<PACK>(sms, out, cyc, hcyc);
  measure<MUFU_PACK>(sms, out, cyc, hcyc);
  measure<UNPACK>(sms, out, cyc, hcyc);
  measure<H2F>(sms, out, cyc, hcyc);
  measure<MUFU_UNPACK>(sms, out, cyc, hcyc);
  measure<MUFU_F16>(sms, out, cyc, hcyc);
  measure<MUFU_F16X2>(sms, out, cyc, hcyc);
  measure<MUFU_MUFU_F16>(sms, out, cyc, hcyc);
  measure<FMNMX>(sms, out, cyc, hcyc);
  measure<MUFU_FMNMX>(sms, out, cyc, hcyc);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    fprintf(stderr, "pipe_rates: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}

// The WebGPU backend's f16 tensor-core mul_mat, written again in CUDA with warp matrices (WMMA, the
// native counterpart of WGSL's subgroup matrices), to learn what the same design reaches without Dawn,
// and what each feature that WGSL lacks would add. Not project code; it runs only on the GPU machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/wmma-anchor bench/probes/wmma-anchor.cu && /tmp/wmma-anchor
//
// C[m][n] = sum_k A[m][k] B[n][k] (both operands K-contiguous, as ggml's mul_mat), f16 in, f32 out.
// Tilings WRxWC:FRxFC (WR x WC warps of FR x FC fragments of 16 x 16, K steps of 32, shared rows padded by
// 8 f16); the backend's was 8x2:2x4 (512 threads on 256 x 128 of C) when this was written, and is 2x2:4x4
// since (RESULTS.md, runs ar-aw). Variants:
//   wgsl-like  one shared stage, prefetch through registers, two barriers a step (WGSL has no async
//              copy, and Dawn gives a workgroup at most 48 KiB)
//   2 stages   two shared stages, prefetch through registers, one barrier a step
//   async N    N shared stages filled by cp.async (no registers)
#include "anchor.cuh"
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
using namespace nvcuda;

constexpr int BK = 32, LDS = BK + 8;

/** a tiling: WR x WC warps, each FR x FC fragments of 16x16 */
template <int WR, int WC, int FR, int FC>
struct Tiling {
  static constexpr int BM = WR * FR * 16, BN = WC * FC * 16, THREADS = WR * WC * 32;
  static constexpr int A_TILE = BM * LDS, B_TILE = BN * LDS;  // halves per stage
  static constexpr int C_FLOATS = WR * WC * 256;              // one 16x16 f32 tile per warp, for the stores
  // uint4 (8 f16) each thread moves per K step
  static constexpr int A_LOADS = BM * (BK / 8) / THREADS, B_LOADS = BN * (BK / 8) / THREADS;
  static_assert(A_LOADS >= 1 && B_LOADS >= 1, "a tile too small for its threads");
};

__device__ inline void cp_async16(void* smem, const void* gmem) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ inline void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

template <int WR, int WC, int FR, int FC, int STAGES, bool ASYNC>
__global__ void __launch_bounds__(WR * WC * 32) mm(const half* __restrict__ A, const half* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K) {
  using T = Tiling<WR, WC, FR, FC>;
  constexpr int BM = T::BM, BN = T::BN, THREADS = T::THREADS, A_TILE = T::A_TILE, B_TILE = T::B_TILE;
  constexpr int AL = T::A_LOADS, BL = T::B_LOADS;
  extern __shared__ __align__(128) unsigned char smem[];
  half* As = reinterpret_cast<half*>(smem);
  half* Bs = As + STAGES * A_TILE;
  float* Cs = reinterpret_cast<float*>(Bs + STAGES * B_TILE);
  // load l of a thread: row at.at.row(l) of the tile, 8 f16 at column ac
  const TilePlace<WR, WC, BM, BN> at;
  const int w = at.w, lane = at.lane, wr = at.wr, wc = at.wc, ac = at.ac, m0 = at.m0, n0 = at.n0, KT = K / BK;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FR][FC];
  warpZero(acc);

  auto compute = [&](const half* as, const half* bs) {
    warpStep<FR, FC, BK, LDS>(acc, as + wr * FR * 16 * LDS, bs + wc * FC * 16 * LDS);
  };

  if constexpr (ASYNC) {
    auto issue = [&](int kt, int s) {
      const int k = kt * BK + ac;
#pragma unroll
      for (int l = 0; l < AL; l++) cp_async16(As + s * A_TILE + at.row(l) * LDS + ac, A + (size_t)(m0 + at.row(l)) * K + k);
#pragma unroll
      for (int l = 0; l < BL; l++) cp_async16(Bs + s * B_TILE + at.row(l) * LDS + ac, B + (size_t)(n0 + at.row(l)) * K + k);
    };
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < KT) issue(s, s);
      cp_async_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      const int next = kt + STAGES - 1;
      if (next < KT) issue(next, next % STAGES);
      cp_async_commit();
      compute(As + (kt % STAGES) * A_TILE, Bs + (kt % STAGES) * B_TILE);
    }
  } else {
    uint4 ra[AL], rb[BL];
    auto stash = [&](int s) {
#pragma unroll
      for (int l = 0; l < AL; l++) *reinterpret_cast<uint4*>(As + s * A_TILE + at.row(l) * LDS + ac) = ra[l];
#pragma unroll
      for (int l = 0; l < BL; l++) *reinterpret_cast<uint4*>(Bs + s * B_TILE + at.row(l) * LDS + ac) = rb[l];
    };
    auto fetch = [&](int kt) {
      const int k = kt * BK + ac;
#pragma unroll
      for (int l = 0; l < AL; l++) ra[l] = *reinterpret_cast<const uint4*>(A + (size_t)(m0 + at.row(l)) * K + k);
#pragma unroll
      for (int l = 0; l < BL; l++) rb[l] = *reinterpret_cast<const uint4*>(B + (size_t)(n0 + at.row(l)) * K + k);
    };
    fetch(0);
    if constexpr (STAGES == 1) {
      for (int kt = 0; kt < KT; kt++) {
        __syncthreads();
        stash(0);
        __syncthreads();
        if (kt + 1 < KT) fetch(kt + 1);
        compute(As, Bs);
      }
    } else {
      stash(0);
      __syncthreads();
      for (int kt = 0; kt < KT; kt++) {
        if (kt + 1 < KT) fetch(kt + 1);
        compute(As + (kt % 2) * A_TILE, Bs + (kt % 2) * B_TILE);
        if (kt + 1 < KT) stash((kt + 1) % 2);
        __syncthreads();
      }
    }
  }

  // results leave through a 16x16 shared tile per warp, as in the WGSL kernel
  warpStore<FR, FC>(acc, Cs + w * 256, lane, wmma::mem_row_major, [&](int i, int j, int r, int c) {
    return C + (size_t)(m0 + wr * FR * 16 + i * 16 + r) * N + n0 + wc * FC * 16 + j * 16 + c;
  });
}

template <int WR, int WC, int FR, int FC, int STAGES, bool ASYNC>
void run(const char* name, int n, const half* dA, const half* dB, float* dC, const std::vector<half>& hA,
         const std::vector<half>& hB) {
  using T = Tiling<WR, WC, FR, FC>;
  constexpr int THREADS = T::THREADS;
  auto mm = ::mm<WR, WC, FR, FC, STAGES, ASYNC>;
  const size_t bytes = (size_t)STAGES * (T::A_TILE + T::B_TILE) * sizeof(half) + T::C_FLOATS * sizeof(float);
  CK(cudaFuncSetAttribute(mm, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  int perSM = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSM, mm, THREADS, bytes));
  dim3 grid(n / T::BN, n / T::BM);
  CK(cudaMemset(dC, 0, (size_t)n * n * sizeof(float)));
  mm<<<grid, THREADS, bytes>>>(dA, dB, dC, n, n, n);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  // check 256 sampled entries against a double-precision sum on the host
  const double nmse = sampledNmse(
      dC, (size_t)n * n, n, n, n, [&](int m, int k) { return __half2float(hA[(size_t)m * n + k]); },
      [&](int c, int k) { return __half2float(hB[(size_t)c * n + k]); }, [&](int m, int c) { return (size_t)m * n + c; });
  // time: the median of 15 launches timed one by one after 2 s of them at full clocks
  const double med = medianMs([&] { mm<<<grid, THREADS, bytes>>>(dA, dB, dC, n, n, n); });
  printf("%dx%d:%dx%d %-10s %5d^3  %7.3f ms  %6.1f TFLOP/s  shared %5.1f KiB  %d/SM  NMSE %.1e\n", WR, WC, FR,
         FC, name, n, med, 2.0 * n * n * (double)n / (med * 1e-3) / 1e12, bytes / 1024.0, perSM, nmse);
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  for (int n : {4096}) {
    std::vector<half> hA((size_t)n * n), hB((size_t)n * n);
    srand(1);
    for (auto& x : hA) x = __float2half((rand() / (float)RAND_MAX) - 0.5f);
    for (auto& x : hB) x = __float2half((rand() / (float)RAND_MAX) - 0.5f);
    half *dA, *dB;
    float* dC;
    CK(cudaMalloc(&dA, hA.size() * sizeof(half)));
    CK(cudaMalloc(&dB, hB.size() * sizeof(half)));
    CK(cudaMalloc(&dC, (size_t)n * n * sizeof(float)));
    CK(cudaMemcpy(dA, hA.data(), hA.size() * sizeof(half), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, hB.data(), hB.size() * sizeof(half), cudaMemcpyHostToDevice));
    // the backend's tiling of the time, then others; "wgsl-like" keeps WGSL's limits (one stage, at most 48 KiB a block)
    run<8, 2, 2, 4, 1, false>("wgsl-like", n, dA, dB, dC, hA, hB);
    run<8, 2, 2, 4, 2, false>("2 stages", n, dA, dB, dC, hA, hB);
    run<8, 2, 2, 4, 3, true>("async 3", n, dA, dB, dC, hA, hB);
    run<4, 2, 4, 4, 1, false>("wgsl-like", n, dA, dB, dC, hA, hB);
    run<4, 2, 4, 4, 2, false>("2 stages", n, dA, dB, dC, hA, hB);
    run<4, 2, 4, 4, 3, true>("async 3", n, dA, dB, dC, hA, hB);
    run<2, 4, 4, 4, 1, false>("wgsl-like", n, dA, dB, dC, hA, hB);
    run<2, 4, 4, 4, 3, true>("async 3", n, dA, dB, dC, hA, hB);
    run<4, 2, 2, 4, 1, false>("wgsl-like", n, dA, dB, dC, hA, hB);
    run<4, 2, 2, 4, 3, true>("async 3", n, dA, dB, dC, hA, hB);
    run<2, 2, 4, 4, 1, false>("wgsl-like", n, dA, dB, dC, hA, hB);
    run<2, 2, 4, 4, 3, true>("async 3", n, dA, dB, dC, hA, hB);
    run<4, 4, 2, 2, 1, false>("wgsl-like", n, dA, dB, dC, hA, hB);
    run<4, 4, 4, 4, 2, false>("2 stages", n, dA, dB, dC, hA, hB);
    run<4, 4, 4, 4, 3, true>("async 3", n, dA, dB, dC, hA, hB);
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
  }
  return 0;
}

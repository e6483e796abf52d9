// What the native anchors (bench/probes/*-anchor.cu) share: a CUDA call checked, their timing, and one K
// step of a warp's fragments and their way out in the backend's f16 tile design (warp matrices, the native
// counterpart of WGSL's subgroup matrices). Not project code; each anchor includes it and builds on its own.
#pragma once
#include <cuda_fp16.h>
#include <mma.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>

#define CK(x)                                                            \
  do {                                                                   \
    cudaError_t e = (x);                                                 \
    if (e != cudaSuccess) {                                              \
      printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

/**
 * the median GPU time in ms of 15 runs of f, each after `before` (not timed: an L2 flush, say), following 2 s
 * of f as load: the SM clock idles low while the host prepares and climbs only under load
 * (benchmarks/RESULTS.md, runs fq and fr)
 */
template <class F, class B>
double medianMs(F f, B before) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float ms = 0;
  CK(cudaEventRecord(e0));
  do {
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
  } while (ms < 2000);
  std::vector<float> times;
  for (int r = 0; r < 15; r++) {
    before();
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

template <class F>
double medianMs(F f) {
  return medianMs(f, [] {});
}

/**
 * the NMSE of 256 sampled entries of an M x N product, copied back from dC (`count` floats, entry (m, n) at
 * at(m, n)), against a double sum over K of a(m, k) b(n, k) on the host
 */
template <class A, class B, class At>
double sampledNmse(const float* dC, size_t count, int M, int N, int K, A a, B b, At at) {
  std::vector<float> hC(count);
  CK(cudaMemcpy(hC.data(), dC, count * sizeof(float), cudaMemcpyDeviceToHost));
  double err = 0, ref2 = 0;
  srand(7);
  for (int s = 0; s < 256; s++) {
    const int m = rand() % M, n = rand() % N;
    double ref = 0;
    for (int k = 0; k < K; k++) ref += (double)a(m, k) * b(n, k);
    const double d = hC[at(m, n)] - ref;
    err += d * d;
    ref2 += ref * ref;
  }
  return err / ref2;
}

/**
 * a thread's place in a BM x BN block of C, computed by WR x WC warps: its warp w (row wr, column wc of
 * them), its lane, the block's first row m0 and column n0, and its loads in a K step of 32 (four threads a
 * row): load l at row(l), 8 f16 from column ac
 */
template <int WR, int WC, int BM, int BN>
struct TilePlace {
  int t, w, lane, wr, wc, ac, m0, n0;
  __device__ TilePlace()
      : t(threadIdx.x), w(t / 32), lane(t % 32), wr(w / WC), wc(w % WC), ac((t % 4) * 8), m0(blockIdx.y * BM),
        n0(blockIdx.x * BN) {}
  __device__ int row(int l) const { return (t + l * WR * WC * 32) / 4; }
};

/** a warp's FR x FC accumulators, zeroed */
template <int FR, int FC>
__device__ inline void warpZero(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> (&acc)[FR][FC]) {
  for (int i = 0; i < FR; i++)
    for (int j = 0; j < FC; j++) nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);
}

/**
 * one K step (BK values) of a warp's FR x FC fragments of 16 x 16 into acc: A's rows from `as` (the
 * warp's first row), B's from `bs`, rows LDS halves apart, both K-contiguous
 */
template <int FR, int FC, int BK, int LDS>
__device__ inline void warpStep(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> (&acc)[FR][FC],
                                const half* as, const half* bs) {
  using namespace nvcuda;
#pragma unroll
  for (int kk = 0; kk < BK; kk += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[FR];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb[FC];
#pragma unroll
    for (int i = 0; i < FR; i++) wmma::load_matrix_sync(fa[i], as + i * 16 * LDS + kk, LDS);
#pragma unroll
    for (int j = 0; j < FC; j++) wmma::load_matrix_sync(fb[j], bs + j * 16 * LDS + kk, LDS);
#pragma unroll
    for (int i = 0; i < FR; i++)
#pragma unroll
      for (int j = 0; j < FC; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
  }
}

/**
 * a warp's FR x FC fragments out through its 16 x 16 shared tile cw, 8 floats a lane, as the WGSL kernel
 * stores them: at(i, j, r, c) is where row r, columns c to c + 7 of fragment (i, j), stored in `layout`, go
 */
template <int FR, int FC, class At>
__device__ inline void warpStore(nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> (&acc)[FR][FC],
                                 float* cw, int lane, nvcuda::wmma::layout_t layout, At at) {
#pragma unroll
  for (int i = 0; i < FR; i++)
#pragma unroll
    for (int j = 0; j < FC; j++) {
      nvcuda::wmma::store_matrix_sync(cw, acc[i][j], 16, layout);
      __syncwarp();
      const int r = lane / 2, c = (lane % 2) * 8;
      float* dst = at(i, j, r, c);
      reinterpret_cast<float4*>(dst)[0] = reinterpret_cast<float4*>(cw + r * 16 + c)[0];
      reinterpret_cast<float4*>(dst)[1] = reinterpret_cast<float4*>(cw + r * 16 + c)[1];
      __syncwarp();
    }
}

// What the native anchors (bench/probes/*-anchor.cu) share: a CUDA call checked, and one K step of a
// warp's fragments in the backend's f16 tile design (warp matrices, the native counterpart of WGSL's
// subgroup matrices). Not project code; each anchor includes it and builds on its own.
#pragma once
#include <cuda_fp16.h>
#include <mma.h>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                            \
  do {                                                                   \
    cudaError_t e = (x);                                                 \
    if (e != cudaSuccess) {                                              \
      printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); \
      exit(1);                                                           \
    }                                                                    \
  } while (0)

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

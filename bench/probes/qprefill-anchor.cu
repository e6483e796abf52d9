// Issue 18's prompt-product row natively: q8_0 and q4_0 weights against f16 activations in CUDA, in the
// f16 kernel's design (warp matrices, the native counterpart of WGSL's subgroup matrices: 2 x 2 warps of
// 4 x 4 fragments on 128 x 128 of C, K steps of 32, one shared stage filled through registers, as the WGSL
// kernel must), to learn what the quantized forms reach against f16 weights without Dawn. Not project
// code; it runs only on the GPU machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/qprefill-anchor bench/probes/qprefill-anchor.cu && /tmp/qprefill-anchor
//
// C[m][n] = sum_k A[m][k] B[n][k] (ggml's mul_mat: both K-contiguous), A of M x K weights, B of N x K f16
// activations, f32 out. Forms, as the backend has them:
//   f16     A in f16
//   copy    A's blocks dequantized into f16 by a kernel of their own, then the f16 kernel (the default)
//   staged  the f16 kernel dequantizing A's blocks as it fetches them (`--q-prefill tiles`)
// Each time is the median of 15 after 2 s of load, L2 flushed before each, the copy and its product timed
// together.
#include "anchor.cuh"
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>
using namespace nvcuda;

constexpr int WR = 2, WC = 2, FR = 4, FC = 4;
constexpr int BM = WR * FR * 16, BN = WC * FC * 16, THREADS = WR * WC * 32, BK = 32, LDS = BK + 8;
constexpr int AL = BM * (BK / 8) / THREADS, BL = BN * (BK / 8) / THREADS;
enum Weights { F16, Q8, Q4 };
// ggml's blocks: q8_0 a f16 scale and 32 int8; q4_0 a f16 scale and 16 bytes, value j the low nibble of
// byte j, value j + 16 its high nibble, each less 8
constexpr int Q8_BYTES = 34, Q4_BYTES = 18;

// 8 values of a block from its 8 (q8_0) or 4 (q4_0) bytes at a 2-byte offset, as raw words and the scale
__device__ inline uint4 fetchBlock(const uint8_t* A, Weights w, int row, int K, int k) {
  const int bytes = w == Q8 ? Q8_BYTES : Q4_BYTES;
  const uint8_t* blk = A + ((size_t)row * (K / 32) + k / 32) * bytes;
  const uint16_t* h = reinterpret_cast<const uint16_t*>(blk);
  const int c = k % 32;
  uint4 r;
  r.x = h[0];
  if (w == Q8) {
    const uint16_t* q = reinterpret_cast<const uint16_t*>(blk + 2 + c);
    r.y = q[0] | (uint32_t(q[1]) << 16);
    r.z = q[2] | (uint32_t(q[3]) << 16);
  } else {
    const uint16_t* q = reinterpret_cast<const uint16_t*>(blk + 2 + c % 16);
    r.y = q[0] | (uint32_t(q[1]) << 16);
    r.z = q[2] | (uint32_t(q[3]) << 16);
    r.w = c >= 16 ? 4 : 0;
  }
  if (w == Q8) r.w = 0;
  return r;
}

// the 8 f16 values of a fetched piece
__device__ inline uint4 decodeBlock(uint4 r, Weights w) {
  const half d = __ushort_as_half((unsigned short)r.x);
  half v[8];
  for (int i = 0; i < 8; i++) {
    const uint32_t word = i < 4 ? r.y : r.z;
    const int byte = (word >> (8 * (i % 4))) & 0xff;
    const int q = w == Q8 ? (int)(int8_t)byte : ((byte >> r.w) & 15) - 8;
    v[i] = __hmul(d, __int2half_rn(q));
  }
  return *reinterpret_cast<uint4*>(v);
}

template <Weights W>
__global__ void __launch_bounds__(THREADS) mm(const void* __restrict__ Av, const half* __restrict__ B,
                                              float* __restrict__ C, int M, int N, int K) {
  __shared__ __align__(128) half As[BM * LDS];
  __shared__ __align__(128) half Bs[BN * LDS];
  __shared__ __align__(128) float Cs[WR * WC * 256];
  const TilePlace<WR, WC, BM, BN> at;
  const int w = at.w, lane = at.lane, wr = at.wr, wc = at.wc, ac = at.ac, m0 = at.m0, n0 = at.n0, KT = K / BK;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FR][FC];
  warpZero(acc);
  uint4 ra[AL], rb[BL];
  auto fetch = [&](int kt) {
    const int k = kt * BK + ac;
#pragma unroll
    for (int l = 0; l < AL; l++)
      ra[l] = W == F16 ? *reinterpret_cast<const uint4*>(static_cast<const half*>(Av) + (size_t)(m0 + at.row(l)) * K + k)
                       : fetchBlock(static_cast<const uint8_t*>(Av), W, m0 + at.row(l), K, k);
#pragma unroll
    for (int l = 0; l < BL; l++) rb[l] = *reinterpret_cast<const uint4*>(B + (size_t)(n0 + at.row(l)) * K + k);
  };
  fetch(0);
  for (int kt = 0; kt < KT; kt++) {
    __syncthreads();
#pragma unroll
    for (int l = 0; l < AL; l++)
      *reinterpret_cast<uint4*>(As + at.row(l) * LDS + ac) = W == F16 ? ra[l] : decodeBlock(ra[l], W);
#pragma unroll
    for (int l = 0; l < BL; l++) *reinterpret_cast<uint4*>(Bs + at.row(l) * LDS + ac) = rb[l];
    __syncthreads();
    if (kt + 1 < KT) fetch(kt + 1);
    warpStep<FR, FC, BK, LDS>(acc, As + wr * FR * 16 * LDS, Bs + wc * FC * 16 * LDS);
  }
  // C is M x N here as ggml's result is N rows of M: row n, column m
  warpStore<FR, FC>(acc, Cs + w * 256, lane, wmma::mem_col_major, [&](int i, int j, int r, int c) {
    return C + (size_t)(n0 + wc * FC * 16 + j * 16 + r) * M + m0 + wr * FR * 16 + i * 16 + c;
  });
}

// the copy: 8 values a thread, into f16 rows
template <Weights W>
__global__ void dequantize(const uint8_t* __restrict__ A, half* __restrict__ out, int M, int K) {
  const size_t piece = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (piece >= (size_t)M * K / 8) return;
  const int row = piece / (K / 8), k = (piece % (K / 8)) * 8;
  reinterpret_cast<uint4*>(out)[piece] = decodeBlock(fetchBlock(A, W, row, K, k), W);
}

static uint16_t toHalf(float x) {
  half h = __float2half(x);
  return *reinterpret_cast<uint16_t*>(&h);
}
static float fromHalf(uint16_t u) { return __half2float(*reinterpret_cast<half*>(&u)); }

// ggml's reference quantizers (q8_0 rounds half away from zero, q4_0 is trunc(x id + 8.5)) and each
// value as the kernels dequantize it
static void quantize(Weights w, const std::vector<float>& x, std::vector<uint8_t>& blocks, std::vector<float>& back) {
  const size_t n = x.size() / 32;
  const int bytes = w == Q8 ? Q8_BYTES : Q4_BYTES;
  blocks.assign(n * bytes, 0);
  back.assign(x.size(), 0);
  for (size_t b = 0; b < n; b++) {
    const float* v = &x[b * 32];
    uint8_t* o = &blocks[b * bytes];
    float amax = 0, signedMax = 0;
    for (int i = 0; i < 32; i++)
      if (fabsf(v[i]) > amax) amax = fabsf(v[i]), signedMax = v[i];
    const float d = w == Q8 ? amax / 127 : signedMax / -8;
    const float id = d != 0 ? 1 / d : 0;
    const uint16_t dh = toHalf(d);
    memcpy(o, &dh, 2);
    const float dd = fromHalf(dh);
    for (int i = 0; i < 32; i++) {
      if (w == Q8) {
        const int q = (int)roundf(v[i] * id);
        o[2 + i] = (uint8_t)(int8_t)q;
        back[b * 32 + i] = fromHalf(toHalf(dd * q));
      } else {
        const int q = std::min(15, (int)(v[i] * id + 8.5f));
        o[2 + i % 16] |= i < 16 ? q : q << 4;
        back[b * 32 + i] = fromHalf(toHalf(dd * (q - 8)));
      }
    }
  }
}

// an L2 flush before each timed run: 256 MiB written over
struct Flush {
  void* bytes;
  int round = 0;
  Flush() { CK(cudaMalloc(&bytes, 256 << 20)); }
  void operator()() { CK(cudaMemsetAsync(bytes, round++, 256 << 20)); }
};

// NMSE of 256 sampled results against a double sum over the values as dequantized (C is N rows of M)
static double check(const float* dC, const std::vector<float>& a, const std::vector<float>& b, int M, int N, int K) {
  return sampledNmse(
      dC, (size_t)M * N, M, N, K, [&](int m, int k) { return a[(size_t)m * K + k]; },
      [&](int n, int k) { return b[(size_t)n * K + k]; }, [&](int m, int n) { return (size_t)n * M + m; });
}

int main() {
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs, L2 %d MiB; each time the median of 15 with L2 flushed; GPU time\n", p.name,
         p.multiProcessorCount, p.l2CacheSize >> 20);
  Flush flush;
  // each timing with L2 flushed before every timed run
  auto flushed = [&](auto f) { return medianMs(f, flush); };
  const int N = 512, K = 4096;
  for (int M : {4096, 14336}) {
    std::vector<float> x((size_t)M * K), bf((size_t)N * K);
    srand(1);
    for (auto& v : x) v = (rand() / (float)RAND_MAX) - 0.5f;
    std::vector<uint16_t> hb(bf.size()), ha(x.size());
    for (size_t i = 0; i < bf.size(); i++) hb[i] = toHalf((rand() / (float)RAND_MAX) - 0.5f), bf[i] = fromHalf(hb[i]);
    std::vector<float> af(x.size());
    for (size_t i = 0; i < x.size(); i++) ha[i] = toHalf(x[i]), af[i] = fromHalf(ha[i]);
    half *dB, *dA, *dCopy;
    float* dC;
    uint8_t* dQ;
    CK(cudaMalloc(&dB, hb.size() * 2));
    CK(cudaMalloc(&dA, ha.size() * 2));
    CK(cudaMalloc(&dCopy, ha.size() * 2));
    CK(cudaMalloc(&dQ, (size_t)M * K / 32 * Q8_BYTES));
    CK(cudaMalloc(&dC, (size_t)M * N * 4));
    CK(cudaMemcpy(dB, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dA, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
    const dim3 grid(N / BN, M / BM);
    const double flop = 2.0 * M * N * (double)K;
    auto report = [&](const char* form, double ms, double nmse, double f16ms) {
      printf("%5d x %d x %d %-12s %8.3f ms %6.1f TFLOP/s %5.0f%% of f16  NMSE %.1e\n", M, N, K, form, ms,
             flop / (ms * 1e-3) / 1e12, 100 * f16ms / ms, nmse);
    };
    const double f16ms = flushed([&] { mm<F16><<<grid, THREADS>>>(dA, dB, dC, M, N, K); });
    CK(cudaGetLastError());
    report("f16", f16ms, check(dC, af, bf, M, N, K), f16ms);
    for (Weights w : {Q8, Q4}) {
      std::vector<uint8_t> blocks;
      std::vector<float> back;
      quantize(w, x, blocks, back);
      CK(cudaMemcpy(dQ, blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
      const char* name = w == Q8 ? "q8_0" : "q4_0";
      const size_t pieces = (size_t)M * K / 8;
      auto copy = [&] {
        if (w == Q8) dequantize<Q8><<<(pieces + 255) / 256, 256>>>(dQ, dCopy, M, K);
        else dequantize<Q4><<<(pieces + 255) / 256, 256>>>(dQ, dCopy, M, K);
      };
      const double copyAlone = flushed(copy);
      const double copied = flushed([&] {
        copy();
        mm<F16><<<grid, THREADS>>>(dCopy, dB, dC, M, N, K);
      });
      CK(cudaGetLastError());
      char form[32];
      snprintf(form, sizeof form, "%s copy", name);
      report(form, copied, check(dC, back, bf, M, N, K), f16ms);
      printf("%26s the copy alone %.3f ms (%.2f TB/s)\n", "", copyAlone,
             (blocks.size() + (double)M * K * 2) / (copyAlone * 1e-3) / 1e12);
      const double staged = flushed([&] {
        if (w == Q8) mm<Q8><<<grid, THREADS>>>(dQ, dB, dC, M, N, K);
        else mm<Q4><<<grid, THREADS>>>(dQ, dB, dC, M, N, K);
      });
      CK(cudaGetLastError());
      snprintf(form, sizeof form, "%s staged", name);
      report(form, staged, check(dC, back, bf, M, N, K), f16ms);
    }
    CK(cudaFree(dB));
    CK(cudaFree(dA));
    CK(cudaFree(dCopy));
    CK(cudaFree(dQ));
    CK(cudaFree(dC));
  }
  return 0;
}

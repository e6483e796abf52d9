// Issue 18's matrix-vector row in CUDA, without Dawn: what a quantized product of one column reaches on the
// same GPU when written natively, against a plain read of the same bytes (the ceiling at that footprint).
// Not project code; it runs only on the GPU machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/mvq-anchor bench/probes/mvq-anchor.cu && /tmp/mvq-anchor
//   /tmp/mvq-anchor --host     (anywhere: the block dot products checked on the CPU against ggml's formulas)
//
// The design is llama.cpp's MMVQ, as the backend's int8 form is: b rounded once to int8 blocks of 32 (a
// scale and the scaled sum a block) by a kernel of its own, then each warp owns R rows and its lanes walk
// the rows' units (q4_0 / q8_0: a block of 32; q4_K: 64 values, one 32-byte run of its quants; q6_K: 64
// values of a half, 16 of each quarter) with dp4a, four products an instruction. Weights in ggml's block
// layouts, back to back (q4_0 / q8_0 / q6_K blocks 2-byte aligned: loaded as 16-bit halves of words).
// Timing: CUDA events over 48 products on rotating weight copies of >= 512 MB in all, so that L2 (60 MB)
// holds none of them; per product, and TB/s of weight bytes.
#include "anchor.cuh"
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <algorithm>

#define HD __host__ __device__ inline

// ---- helpers that run on both sides (the --host check runs the same unit dot products on the CPU)

HD int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int i = 0; i < 4; i++) c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return c;
#endif
}

/** bytes minus 32 each, no borrow between them (q6_K's values) */
HD uint32_t sub32x4(uint32_t a) {
#ifdef __CUDA_ARCH__
  return __vsub4(a, 0x20202020u);
#else
  uint32_t r = 0;
  for (int i = 0; i < 4; i++) r |= ((((a >> (8 * i)) & 0xFF) - 32u) & 0xFF) << (8 * i);
  return r;
#endif
}

HD float f16(uint16_t h) {
  uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf(static_cast<float>(m), -24) : ldexpf(static_cast<float>(m | 1024), static_cast<int>(e) - 25);
  return s ? -v : v;
}

/** the 16-bit halves at a 2-byte aligned address, as a word */
HD uint32_t word2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
}
HD uint32_t word4(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

/** b rounded: int8 values (K), a scale and the scale times the values' sum a block of 32 */
struct Q8 {
  const int8_t* q;
  const float* d;
  const float* s;
};

HD uint32_t bword(const Q8& b, int at) { return word4(reinterpret_cast<const uint8_t*>(b.q + at)); }

enum Type { Q4_0, Q8_0, Q4_K, Q6_K };
const char* NAMES[] = {"q4_0", "q8_0", "q4_K", "q6_K"};
HD constexpr int blockValues(Type t) { return t == Q4_0 || t == Q8_0 ? 32 : 256; }
HD constexpr int blockBytes(Type t) { return t == Q4_0 ? 18 : t == Q8_0 ? 34 : t == Q4_K ? 144 : 210; }
/** values a lane takes at a time */
HD constexpr int unitValues(Type t) { return t == Q4_0 || t == Q8_0 ? 32 : 64; }

/** unit u of a row (its bytes from `row`) against b: sum of its values times b's */
template <Type T>
HD float unitDot(const uint8_t* row, const Q8& b, int u) {
  if constexpr (T == Q4_0) {
    const uint8_t* blk = row + 18 * u;
    const float d = f16(*reinterpret_cast<const uint16_t*>(blk));
    int sum = 0;
    for (int w = 0; w < 4; w++) {
      const uint32_t v = word2(blk + 2 + 4 * w);
      sum = dp4a(v & 0x0F0F0F0Fu, bword(b, 32 * u + 4 * w), sum);
      sum = dp4a((v >> 4) & 0x0F0F0F0Fu, bword(b, 32 * u + 16 + 4 * w), sum);
    }
    // (q - 8) d_w times q_b d_b
    return d * (b.d[u] * static_cast<float>(sum) - 8.0f * b.s[u]);
  } else if constexpr (T == Q8_0) {
    const uint8_t* blk = row + 34 * u;
    const float d = f16(*reinterpret_cast<const uint16_t*>(blk));
    int sum = 0;
    for (int w = 0; w < 8; w++) sum = dp4a(word2(blk + 2 + 4 * w), bword(b, 32 * u + 4 * w), sum);
    return d * b.d[u] * static_cast<float>(sum);
  } else if constexpr (T == Q4_K) {
    // unit u: super-block u / 4, chunk c = u % 4 (sub-blocks 2c in the low nibbles, 2c + 1 in the high)
    const uint8_t* blk = row + 144 * (u / 4);
    const int c = u % 4;
    const uint32_t dd = word4(blk);
    const float d = f16(dd & 0xFFFF), dmin = f16(dd >> 16);
    const uint8_t* S = blk + 4;
    int sc[2], mn[2];
    for (int k = 0; k < 2; k++) {
      const int s = 2 * c + k;
      sc[k] = s < 4 ? S[s] & 63 : (S[s + 4] & 15) | ((S[s - 4] >> 6) << 4);
      mn[k] = s < 4 ? S[s + 4] & 63 : (S[s + 4] >> 4) | ((S[s] >> 6) << 4);
    }
    const uint8_t* qs = blk + 16 + 32 * c;
    const int b0 = 256 * (u / 4) + 64 * c;
    int lo = 0, hi = 0;
    for (int w = 0; w < 8; w++) {
      const uint32_t v = word4(qs + 4 * w);
      lo = dp4a(v & 0x0F0F0F0Fu, bword(b, b0 + 4 * w), lo);
      hi = dp4a((v >> 4) & 0x0F0F0F0Fu, bword(b, b0 + 32 + 4 * w), hi);
    }
    const int k0 = b0 / 32;
    return d * (sc[0] * b.d[k0] * static_cast<float>(lo) + sc[1] * b.d[k0 + 1] * static_cast<float>(hi)) -
           dmin * (mn[0] * b.s[k0] + mn[1] * b.s[k0 + 1]);
  } else {
    // unit u: super-block u / 4, half n = (u / 2) % 2, l from 16 t (t = u % 2): values l + 32 g for g = 0..3
    const uint8_t* blk = row + 210 * (u / 4);
    const int n = (u / 2) % 2, t = u % 2;
    const uint8_t* L = blk + 64 * n + 16 * t;
    const uint8_t* H = blk + 128 + 32 * n + 16 * t;
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n);
    const float d = f16(*reinterpret_cast<const uint16_t*>(blk + 208));
    const int b0 = 256 * (u / 4) + 128 * n + 16 * t;
    int sum[4] = {0, 0, 0, 0};
    for (int w = 0; w < 4; w++) {
      const uint32_t l0 = word2(L + 4 * w), l1 = word2(L + 32 + 4 * w), h = word2(H + 4 * w);
      const uint32_t q0 = (l0 & 0x0F0F0F0Fu) | ((h & 0x03030303u) << 4);
      const uint32_t q1 = (l1 & 0x0F0F0F0Fu) | ((h & 0x0C0C0C0Cu) << 2);
      const uint32_t q2 = ((l0 >> 4) & 0x0F0F0F0Fu) | (h & 0x30303030u);
      const uint32_t q3 = ((l1 >> 4) & 0x0F0F0F0Fu) | ((h & 0xC0C0C0C0u) >> 2);
      sum[0] = dp4a(sub32x4(q0), bword(b, b0 + 4 * w), sum[0]);
      sum[1] = dp4a(sub32x4(q1), bword(b, b0 + 32 + 4 * w), sum[1]);
      sum[2] = dp4a(sub32x4(q2), bword(b, b0 + 64 + 4 * w), sum[2]);
      sum[3] = dp4a(sub32x4(q3), bword(b, b0 + 96 + 4 * w), sum[3]);
    }
    float r = 0.0f;
    for (int g = 0; g < 4; g++) r += sc[t + 2 * g] * b.d[(b0 + 32 * g) / 32] * static_cast<float>(sum[g]);
    return d * r;
  }
}

// ---- host: weights, ggml's dequantization (the README's formulas), b rounded as q8_0 rounds

static uint32_t rng = 12345;
static uint32_t next() { return rng = rng * 1664525u + 1013904223u; }
static float uniform() { return (next() >> 8) * (1.0f / 16777216.0f); }
static uint16_t toF16(float x) {
  // positive normal values only (scales): exponent and 10 bits of mantissa, truncated
  int e;
  const float m = frexpf(x, &e);  // x = m 2^e, m in [0.5, 1)
  return static_cast<uint16_t>(((e + 14) << 10) | (static_cast<uint32_t>((m * 2.0f - 1.0f) * 1024.0f) & 1023));
}

/** random blocks with plausible scales (random quants, positive scales, signed q6_K scales) */
static std::vector<uint8_t> weights(Type t, size_t rows, int K) {
  const size_t blocks = rows * (K / blockValues(t));
  std::vector<uint8_t> w(blocks * blockBytes(t));
  for (auto& x : w) x = static_cast<uint8_t>(next() >> 24);
  for (size_t i = 0; i < blocks; i++) {
    uint8_t* blk = w.data() + i * blockBytes(t);
    auto put = [](uint8_t* p, uint16_t h) { memcpy(p, &h, 2); };
    if (t == Q4_0 || t == Q8_0) put(blk, toF16(0.002f + 0.01f * uniform()));
    if (t == Q4_K) {
      put(blk, toF16(0.0005f + 0.002f * uniform()));
      put(blk + 2, toF16(0.0005f + 0.002f * uniform()));
    }
    if (t == Q6_K) put(blk + 208, toF16(0.0005f + 0.002f * uniform()));
  }
  return w;
}

static void dequantize(Type t, const uint8_t* blk, float* y) {
  auto h = [&](int at) { uint16_t v; memcpy(&v, blk + at, 2); return f16(v); };
  if (t == Q4_0) {
    for (int j = 0; j < 16; j++) {
      y[j] = h(0) * ((blk[2 + j] & 15) - 8);
      y[j + 16] = h(0) * ((blk[2 + j] >> 4) - 8);
    }
  } else if (t == Q8_0) {
    for (int j = 0; j < 32; j++) y[j] = h(0) * static_cast<int8_t>(blk[2 + j]);
  } else if (t == Q4_K) {
    const uint8_t* S = blk + 4;
    for (int c = 0; c < 4; c++) {
      for (int k = 0; k < 2; k++) {
        const int s = 2 * c + k;
        const int sc = s < 4 ? S[s] & 63 : (S[s + 4] & 15) | ((S[s - 4] >> 6) << 4);
        const int mn = s < 4 ? S[s + 4] & 63 : (S[s + 4] >> 4) | ((S[s] >> 6) << 4);
        for (int l = 0; l < 32; l++) {
          const int q = k == 0 ? blk[16 + 32 * c + l] & 15 : blk[16 + 32 * c + l] >> 4;
          y[64 * c + 32 * k + l] = (h(0) * sc) * q - h(2) * mn;
        }
      }
    }
  } else {
    for (int n = 0; n < 2; n++) {
      const uint8_t* L = blk + 64 * n;
      const uint8_t* H = blk + 128 + 32 * n;
      const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n);
      const float d = h(208);
      for (int l = 0; l < 32; l++) {
        const int i = l / 16;
        float* o = y + 128 * n;
        o[l] = d * sc[i + 0] * (((L[l] & 15) | ((H[l] >> 0) & 3) << 4) - 32);
        o[l + 32] = d * sc[i + 2] * (((L[l + 32] & 15) | ((H[l] >> 2) & 3) << 4) - 32);
        o[l + 64] = d * sc[i + 4] * (((L[l] >> 4) | ((H[l] >> 4) & 3) << 4) - 32);
        o[l + 96] = d * sc[i + 6] * (((L[l + 32] >> 4) | ((H[l] >> 6) & 3) << 4) - 32);
      }
    }
  }
}

/** the exact products (f64 over the dequantized weights and f32 b) of rows [0, rows) */
static std::vector<double> reference(Type t, const std::vector<uint8_t>& w, const std::vector<float>& b, int rows, int K) {
  std::vector<double> y(rows);
  std::vector<float> v(256);
  const int per = K / blockValues(t);
  for (int r = 0; r < rows; r++) {
    double acc = 0;
    for (int i = 0; i < per; i++) {
      dequantize(t, w.data() + (static_cast<size_t>(r) * per + i) * blockBytes(t), v.data());
      for (int j = 0; j < blockValues(t); j++) acc += static_cast<double>(v[j]) * b[i * blockValues(t) + j];
    }
    y[r] = acc;
  }
  return y;
}

/** b rounded on the host as the device kernel rounds it (the --host check) */
static void roundHost(const std::vector<float>& x, std::vector<int8_t>& q, std::vector<float>& d, std::vector<float>& s) {
  const int K = static_cast<int>(x.size());
  q.resize(K);
  d.resize(K / 32);
  s.resize(K / 32);
  for (int k = 0; k < K / 32; k++) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = std::max(amax, std::fabs(x[32 * k + j]));
    const float dk = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
      q[32 * k + j] = static_cast<int8_t>(roundf(x[32 * k + j] * id));
      sum += q[32 * k + j];
    }
    d[k] = dk;
    s[k] = dk * sum;
  }
}

static double nmse(const std::vector<double>& ref, const float* y, int n) {
  double e = 0, r = 0;
  for (int i = 0; i < n; i++) {
    e += (y[i] - ref[i]) * (y[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return e / r;
}

static std::vector<float> activations(int K) {
  std::vector<float> b(K);
  for (auto& x : b) x = 2.0f * uniform() - 1.0f;
  return b;
}

template <Type T>
static double hostCheck(int rows, int K) {
  const auto w = weights(T, rows, K);
  const auto b = activations(K);
  std::vector<int8_t> q;
  std::vector<float> d, s;
  roundHost(b, q, d, s);
  const Q8 qb{q.data(), d.data(), s.data()};
  std::vector<float> y(rows);
  const size_t rowBytes = static_cast<size_t>(K / blockValues(T)) * blockBytes(T);
  for (int r = 0; r < rows; r++) {
    float acc = 0;
    for (int u = 0; u < K / unitValues(T); u++) acc += unitDot<T>(w.data() + r * rowBytes, qb, u);
    y[r] = acc;
  }
  return nmse(reference(T, w, b, rows, K), y.data(), rows);
}

// ---- device

/** b rounded to int8 blocks of 32: a warp a block, a lane a value */
__global__ void roundB(const float* x, int8_t* q, float* d, float* s, int K) {
  const int k = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (k >= K / 32) return;
  const float v = x[32 * k + lane];
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
  const float id = amax > 0 ? 127.0f / amax : 0.0f;
  const int r = __float2int_rn(v * id);
  int sum = r;
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, o);
  q[32 * k + lane] = static_cast<int8_t>(r);
  if (lane == 0) {
    d[k] = amax / 127.0f;
    s[k] = amax / 127.0f * sum;
  }
}

/** a warp owns R rows; its lanes walk the units of each */
template <Type T, int R>
__global__ void mvq(const uint8_t* w, Q8 b, float* y, int M, int K) {
  const int warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = warp * R;
  if (row0 >= M) return;
  const size_t rowBytes = static_cast<size_t>(K / blockValues(T)) * blockBytes(T);
  float acc[R];
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  for (int u = lane; u < K / unitValues(T); u += 32) {
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] += unitDot<T>(w + static_cast<size_t>(min(row0 + r, M - 1)) * rowBytes, b, u);
  }
#pragma unroll
  for (int r = 0; r < R; r++) {
    float v = acc[r];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    if (lane == 0 && row0 + r < M) y[row0 + r] = v;
  }
}

/** a plain read of n 16-byte words (what the product's bytes cost to read at that footprint) */
__global__ void plainRead(const uint4* w, size_t n, float* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = w[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) sink[0] = 1.0f;  // never, but the loads stay
}

constexpr int ROUNDS = 48;

template <Type T, int R, int WARPS>
static void timeProduct(const uint8_t* dw, size_t bytes, int copies, Q8 b, float* dy, int M, int K, const std::vector<double>& ref,
                        int refRows, double& bestUs, const char*& bestName) {
  const int blocks = (M + R * WARPS - 1) / (R * WARPS);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int c = 0; c < copies; c++) mvq<T, R><<<blocks, 32 * WARPS>>>(dw + c * bytes, b, dy, M, K);
  CK(cudaDeviceSynchronize());
  std::vector<float> y(refRows);
  CK(cudaMemcpy(y.data(), dy, refRows * sizeof(float), cudaMemcpyDeviceToHost));
  const double err = nmse(ref, y.data(), refRows);
  CK(cudaEventRecord(e0));
  for (int i = 0; i < ROUNDS; i++) mvq<T, R><<<blocks, 32 * WARPS>>>(dw + (i % copies) * bytes, b, dy, M, K);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double us = ms * 1e3 / ROUNDS;
  printf("  %-4s %5d x %5d  R %d  warps %d  %7.1f us  %5.2f TB/s  NMSE %.1e%s\n", NAMES[T], M, K, R, WARPS, us, bytes / us / 1e6, err,
         err > 1e-3 ? "  WRONG" : "");
  if (err <= 1e-3 && us < bestUs) {
    bestUs = us;
    static char name[64];
    snprintf(name, sizeof name, "R %d, %d warps", R, WARPS);
    bestName = name;
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
}

template <Type T>
static void run(int M, int K) {
  const size_t bytes = static_cast<size_t>(M) * (K / blockValues(T)) * blockBytes(T);
  const int copies = std::max(2, static_cast<int>((512u << 20) / bytes) + 1);
  const auto w = weights(T, M, K);
  const auto b = activations(K);
  const int refRows = std::min(M, 512);
  const auto ref = reference(T, w, b, refRows, K);
  uint8_t* dw;
  CK(cudaMalloc(&dw, bytes * copies));
  for (int c = 0; c < copies; c++) CK(cudaMemcpy(dw + c * bytes, w.data(), bytes, cudaMemcpyHostToDevice));
  float *dx, *dd, *ds, *dy;
  int8_t* dq;
  CK(cudaMalloc(&dx, K * sizeof(float)));
  CK(cudaMalloc(&dq, K));
  CK(cudaMalloc(&dd, K / 32 * sizeof(float)));
  CK(cudaMalloc(&ds, K / 32 * sizeof(float)));
  CK(cudaMalloc(&dy, M * sizeof(float)));
  CK(cudaMemcpy(dx, b.data(), K * sizeof(float), cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // b's rounding alone (part of every product's cost in llama.cpp: a kernel before the product)
  CK(cudaEventRecord(e0));
  for (int i = 0; i < ROUNDS; i++) roundB<<<(K / 32 + 7) / 8, 256>>>(dx, dq, dd, ds, K);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double roundUs = ms * 1e3 / ROUNDS;
  // the plain read of the same bytes (16-byte words; the bytes past the last whole word are left)
  const size_t words = bytes / 16;
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  plainRead<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(dw), words, dy);
  CK(cudaEventRecord(e0));
  for (int i = 0; i < ROUNDS; i++) plainRead<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(dw + (i % copies) * bytes), words, dy);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double readUs = ms * 1e3 / ROUNDS;
  printf("%s %d x %d: %.1f MB, %d copies; b rounded %.1f us; plain read %.1f us = %.2f TB/s\n", NAMES[T], M, K, bytes / 1e6, copies,
         roundUs, readUs, bytes / readUs / 1e6);
  const Q8 qb{dq, dd, ds};
  double best = 1e30;
  const char* bestName = "";
  timeProduct<T, 1, 4>(dw, bytes, copies, qb, dy, M, K, ref, refRows, best, bestName);
  timeProduct<T, 1, 8>(dw, bytes, copies, qb, dy, M, K, ref, refRows, best, bestName);
  timeProduct<T, 2, 4>(dw, bytes, copies, qb, dy, M, K, ref, refRows, best, bestName);
  timeProduct<T, 2, 8>(dw, bytes, copies, qb, dy, M, K, ref, refRows, best, bestName);
  timeProduct<T, 4, 4>(dw, bytes, copies, qb, dy, M, K, ref, refRows, best, bestName);
  printf("{\"probe\":\"mvq-anchor\",\"type\":\"%s\",\"M\":%d,\"K\":%d,\"bytes\":%zu,\"round_b_us\":%.2f,\"plain_read_us\":%.2f,"
         "\"plain_read_tb_s\":%.3f,\"best\":\"%s\",\"best_us\":%.2f,\"best_tb_s\":%.3f,\"with_rounding_tb_s\":%.3f}\n",
         NAMES[T], M, K, bytes, roundUs, readUs, bytes / readUs / 1e6, bestName, best, bytes / best / 1e6, bytes / (best + roundUs) / 1e6);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(dw));
  CK(cudaFree(dx));
  CK(cudaFree(dq));
  CK(cudaFree(dd));
  CK(cudaFree(ds));
  CK(cudaFree(dy));
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--host") == 0) {
    // the unit dot products against ggml's formulas, on the CPU: b's rounding alone differs (~1e-5)
    const double e[] = {hostCheck<Q4_0>(37, 512), hostCheck<Q8_0>(37, 512), hostCheck<Q4_K>(37, 512), hostCheck<Q6_K>(37, 512)};
    bool ok = true;
    for (int t = 0; t < 4; t++) {
      printf("%s: NMSE %.2e against the dequantized f64 product%s\n", NAMES[t], e[t], e[t] > 1e-3 ? "  WRONG" : "");
      ok = ok && e[t] <= 1e-3;
    }
    return ok ? 0 : 1;
  }
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  const int shapes[][2] = {{4096, 4096}, {14336, 4096}, {4096, 14336}};
  for (const auto& s : shapes) {
    run<Q4_0>(s[0], s[1]);
    run<Q8_0>(s[0], s[1]);
    run<Q4_K>(s[0], s[1]);
    run<Q6_K>(s[0], s[1]);
  }
  return 0;
}

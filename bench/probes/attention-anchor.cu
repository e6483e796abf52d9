// Issue 18's prompt-attention row natively, in the backend's own design: the one-pass kernel
// (flash_attn_tiles) written again in CUDA warp matrices with what WGSL allows it (fragments opaque, so S
// goes through shared memory for the lanes' scores and P back through it for P V; O rescaled through shared
// memory only when a row's max grows by more than e^8; barriers where the WGSL kernel has them), against the
// unfused chain in the same design (S = Q K^T and P V on the f16 product's tiles, a softmax with the mask
// between). So the ratio the issue asks for (2x the chain) can be read off for this design without Dawn;
// the unrestricted anchor (cuDNN, FlashAttention-2) is native-anchors.py's. Not project code; it runs only
// on the GPU machine:
//
//   nvcc -O3 -arch=sm_90 -o /tmp/attention-anchor bench/probes/attention-anchor.cu && /tmp/attention-anchor
//
// The bench's case: n_q = n_kv = 2048, 32 heads over 8 KV heads, D 128, a dense f16 mask, f16 q, k and v;
// GPU time, the median of 15 after 2 s of load.
#include "anchor.cuh"
#include <cmath>
using namespace nvcuda;

constexpr int D = 128;

// ---- the one-pass kernel, as flash_attn_tiles has it: 8 subgroups of 16 query rows, blocks of 32 keys,
// K's and V's rows padded by 8 f16, S's to 36 f32 and P's to 40 f16 (a lane taking every other key), K, V
// and the mask's words loaded a block ahead through registers

constexpr int KEYS = 32, SG = 8, ROWS = 16 * SG, THREADS = 32 * SG;
constexpr int KS = D + 8, VS = D + 8, SS = KEYS + 4, PS = KEYS + 8, RESCALE_AT = 8;
constexpr int KV_LOADS = KEYS * D / 8 / THREADS;  // uint4s of K (and of V) a thread moves a block

using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__global__ void __launch_bounds__(THREADS) fused(const half* __restrict__ Q, const half* __restrict__ K,
                                                 const half* __restrict__ V, const half* __restrict__ mask,
                                                 float* __restrict__ O, int nQ, int nKV, int H, int HKV,
                                                 float scale) {
  __shared__ __align__(128) half Ks[KEYS * KS];
  __shared__ __align__(128) half Vs[KEYS * VS];
  __shared__ __align__(128) float Ss[SG * 16 * SS];
  __shared__ __align__(128) half Ps[SG * 16 * PS];
  __shared__ float Ls[ROWS];
  __shared__ int flags[2];
  const int t = threadIdx.x, sg = t / 32, lane = t % 32, row = lane / 2, hc = lane % 2;
  const int h = blockIdx.y, g = h / (H / HKV), i0 = blockIdx.x * ROWS, i = i0 + sg * 16 + row;
  const half* kh = K + (size_t)g * nKV * D;
  const half* vh = V + (size_t)g * nKV * D;
  float* ss = Ss + sg * 16 * SS;
  half* ps = Ps + sg * 16 * PS;
  if (t < 2) flags[t] = 0;
  __syncthreads();

  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> q[D / 16];
  for (int c = 0; c < D / 16; c++) wmma::load_matrix_sync(q[c], Q + ((size_t)h * nQ + i0 + sg * 16) * D + c * 16, D);
  Acc o[D / 16];
  for (int n = 0; n < D / 16; n++) wmma::fill_fragment(o[n], 0.0f);
  float m = -INFINITY, l = 0;
  bool started = false;

  uint4 kr[KV_LOADS], vr[KV_LOADS], mkn[4];
  auto fetch = [&](int j0) {
    for (int e = 0; e < KV_LOADS; e++) {
      const int x = t + e * THREADS, key = x / (D / 8), piece = x % (D / 8);
      kr[e] = *reinterpret_cast<const uint4*>(kh + (size_t)(j0 + key) * D + piece * 8);
      vr[e] = *reinterpret_cast<const uint4*>(vh + (size_t)(j0 + key) * D + piece * 8);
    }
    for (int u = 0; u < 4; u++) mkn[u] = reinterpret_cast<const uint4*>(mask + (size_t)i * nKV + j0)[u];
  };
  // O's fragments through the warp's region of S: `body` on each element x of fragment n, then (`reload`)
  // the fragment loaded back
  auto through = [&](bool reload, auto body) {
    for (int n = 0; n < D / 16; n++) {
      __syncthreads();
      wmma::store_matrix_sync(ss, o[n], 16, wmma::mem_row_major);
      __syncthreads();
      for (int x = lane; x < 256; x += 32) body(n, x);
      __syncthreads();
      if (reload) wmma::load_matrix_sync(o[n], ss, 16, wmma::mem_row_major);
    }
  };
  fetch(0);
  for (int j0 = 0; j0 < nKV; j0 += KEYS) {
    uint4 mk[4];
    for (int u = 0; u < 4; u++) mk[u] = mkn[u];
    const half* mh = reinterpret_cast<const half*>(mk);
    // whether a row sees a key of the block, through a uniform load (two barriers) as the WGSL kernel has it
    bool seen = false;
    for (int jj = 0; jj < KEYS; jj++) seen = seen || __half2float(mh[jj]) > -INFINITY;
    if (seen) flags[1] = 1;
    __syncthreads();
    const int go = flags[1];
    __syncthreads();
    if (t == 0) flags[1] = 0;
    if (go == 0) {
      if (j0 + KEYS < nKV) fetch(j0 + KEYS);
      __syncthreads();
      continue;
    }
    for (int e = 0; e < KV_LOADS; e++) {
      const int x = t + e * THREADS, key = x / (D / 8), piece = x % (D / 8);
      *reinterpret_cast<uint4*>(Ks + key * KS + piece * 8) = kr[e];
      *reinterpret_cast<uint4*>(Vs + key * VS + piece * 8) = vr[e];
    }
    __syncthreads();
    if (j0 + KEYS < nKV) fetch(j0 + KEYS);
    for (int tile = 0; tile < KEYS / 16; tile++) {
      Acc s;
      wmma::fill_fragment(s, 0.0f);
      for (int c = 0; c < D / 16; c++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> kf;
        wmma::load_matrix_sync(kf, Ks + tile * 16 * KS + c * 16, KS);
        wmma::mma_sync(s, q[c], kf, s);
      }
      wmma::store_matrix_sync(ss + tile * 16, s, SS, wmma::mem_row_major);
    }
    __syncthreads();
    float sv[KEYS / 2], bm = -INFINITY;
    for (int c = 0; c < KEYS / 2; c++) {
      const int jj = 2 * c + hc;
      sv[c] = ss[row * SS + jj] * scale + __half2float(mh[jj]);
      bm = fmaxf(bm, sv[c]);
    }
    bm = fmaxf(bm, __shfl_xor_sync(0xffffffffu, bm, 1));
    float alpha = 1;
    if (__any_sync(0xffffffffu, bm > m + RESCALE_AT)) {
      const float mn = fmaxf(m, bm);
      alpha = m > -INFINITY ? expf(m - mn) : 0;
      m = mn;
      l *= alpha;
      flags[0] = 1;
    }
    float sum = 0;
    for (int c = 0; c < KEYS / 2; c++) {
      const float p = expf(sv[c] - m);
      sum += p;
      ps[row * PS + 2 * c + hc] = __float2half(p);
    }
    l += sum + __shfl_xor_sync(0xffffffffu, sum, 1);
    if (hc == 0) Ls[sg * 16 + row] = alpha;
    // the rescale flag through a uniform load, then cleared
    __syncthreads();
    const int rescaling = flags[0];
    __syncthreads();
    if (t == 0) flags[0] = 0;
    if (rescaling != 0 && started) through(true, [&](int, int x) { ss[x] *= Ls[sg * 16 + x / 16]; });
    for (int tile = 0; tile < KEYS / 16; tile++) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> pf;
      wmma::load_matrix_sync(pf, ps + tile * 16, PS);
      for (int n = 0; n < D / 16; n++) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> vf;
        wmma::load_matrix_sync(vf, Vs + tile * 16 * VS + n * 16, VS);
        wmma::mma_sync(o[n], pf, vf, o[n]);
      }
    }
    started = true;
  }
  if (hc == 0) Ls[sg * 16 + row] = l > 0 ? 1 / l : 0;
  // O[h][i][d], as the chain's product leaves it
  through(false, [&](int n, int x) {
    O[((size_t)h * nQ + i0 + sg * 16 + x / 16) * D + n * 16 + x % 16] = ss[x] * Ls[sg * 16 + x / 16];
  });
}

// ---- the chain: the f16 product's tiles (2 x 2 warps of 4 x 4 fragments, K steps of 32, one shared stage
// filled through registers), batched over heads; C[m][n] = sum_k A[m][k] B[n][k], B's batch z / bDiv

constexpr int WR = 2, WC = 2, FR = 4, FC = 4, BM = WR * FR * 16, BN = WC * FC * 16, MM_THREADS = WR * WC * 32;
constexpr int BK = 32, LDS = BK + 8, AL = BM * (BK / 8) / MM_THREADS, BL = BN * (BK / 8) / MM_THREADS;

__global__ void __launch_bounds__(MM_THREADS) product(const half* __restrict__ A, const half* __restrict__ B,
                                                      float* __restrict__ C, int M, int N, int K, size_t sA,
                                                      size_t sB, size_t sC, int bDiv) {
  __shared__ __align__(128) half As[BM * LDS];
  __shared__ __align__(128) half Bs[BN * LDS];
  __shared__ __align__(128) float Cs[WR * WC * 256];
  const int z = blockIdx.z;
  A += z * sA;
  B += (z / bDiv) * sB;
  C += z * sC;
  const TilePlace<WR, WC, BM, BN> place;
  const int w = place.w, lane = place.lane, wr = place.wr, wc = place.wc, ac = place.ac, m0 = place.m0, n0 = place.n0;
  auto at = [&](int l) { return place.row(l); };
  Acc acc[FR][FC];
  warpZero(acc);
  uint4 ra[AL], rb[BL];
  auto fetch = [&](int k) {
    for (int l = 0; l < AL; l++) ra[l] = *reinterpret_cast<const uint4*>(A + (size_t)(m0 + at(l)) * K + k + ac);
    for (int l = 0; l < BL; l++) rb[l] = *reinterpret_cast<const uint4*>(B + (size_t)(n0 + at(l)) * K + k + ac);
  };
  fetch(0);
  for (int k = 0; k < K; k += BK) {
    __syncthreads();
    for (int l = 0; l < AL; l++) *reinterpret_cast<uint4*>(As + at(l) * LDS + ac) = ra[l];
    for (int l = 0; l < BL; l++) *reinterpret_cast<uint4*>(Bs + at(l) * LDS + ac) = rb[l];
    __syncthreads();
    if (k + BK < K) fetch(k + BK);
    warpStep<FR, FC, BK, LDS>(acc, As + wr * FR * 16 * LDS, Bs + wc * FC * 16 * LDS);
  }
  warpStore<FR, FC>(acc, Cs + w * 256, lane, wmma::mem_row_major, [&](int i, int j, int r, int c) {
    return C + (size_t)(m0 + wr * FR * 16 + i * 16 + r) * N + n0 + wc * FC * 16 + j * 16 + c;
  });
}

// softmax(scale S + mask) of each row, a warp a row of 2048, into f16
__global__ void softmax(const float* __restrict__ S, const half* __restrict__ mask, half* __restrict__ P, int nQ,
                        int nKV, float scale) {
  const int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32, i = r % nQ;
  constexpr int PER = 2048 / 32 / 4;
  const float4* s = reinterpret_cast<const float4*>(S + (size_t)r * nKV);
  const half2* mk = reinterpret_cast<const half2*>(mask + (size_t)i * nKV);
  float4 x[PER];
  float mx = -INFINITY;
  for (int u = 0; u < PER; u++) {
    const int v = lane + u * 32;
    x[u] = s[v];
    const float2 a = __half22float2(mk[2 * v]), b = __half22float2(mk[2 * v + 1]);
    x[u] = make_float4(x[u].x * scale + a.x, x[u].y * scale + a.y, x[u].z * scale + b.x, x[u].w * scale + b.y);
    mx = fmaxf(mx, fmaxf(fmaxf(x[u].x, x[u].y), fmaxf(x[u].z, x[u].w)));
  }
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0;
  for (int u = 0; u < PER; u++) {
    x[u] = make_float4(expf(x[u].x - mx), expf(x[u].y - mx), expf(x[u].z - mx), expf(x[u].w - mx));
    sum += x[u].x + x[u].y + x[u].z + x[u].w;
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  half2* p = reinterpret_cast<half2*>(P + (size_t)r * nKV);
  for (int u = 0; u < PER; u++) {
    const int v = lane + u * 32;
    p[2 * v] = __floats2half2_rn(x[u].x / sum, x[u].y / sum);
    p[2 * v + 1] = __floats2half2_rn(x[u].z / sum, x[u].w / sum);
  }
}

static std::vector<half> randoms(size_t n, float lo, float hi, unsigned seed) {
  std::vector<half> v(n);
  srand(seed);
  for (auto& x : v) x = __float2half(lo + (hi - lo) * (rand() / (float)RAND_MAX));
  return v;
}

template <class T>
static T* upload(const std::vector<T>& v) {
  T* d;
  CK(cudaMalloc(&d, v.size() * sizeof(T)));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

int main() {
  const int nQ = 2048, nKV = 2048, H = 32, HKV = 8;
  const float scale = 1 / sqrtf((float)D);
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("%s, %d SMs; n_q = n_kv = %d, %d / %d heads, D %d, a dense f16 mask; GPU time, median of 15\n", p.name,
         p.multiProcessorCount, nQ, H, HKV, D);
  const auto hq = randoms((size_t)H * nQ * D, -1, 1, 1), hk = randoms((size_t)HKV * nKV * D, -1, 1, 2);
  const auto hv = randoms((size_t)HKV * nKV * D, -1, 1, 3), hm = randoms((size_t)nQ * nKV, -1, 1, 4);
  // V transposed for the chain's P V (rows of the head dimension, as a cache without flash attention keeps it)
  std::vector<half> hvt(hv.size());
  for (int g = 0; g < HKV; g++)
    for (int j = 0; j < nKV; j++)
      for (int d = 0; d < D; d++) hvt[((size_t)g * D + d) * nKV + j] = hv[((size_t)g * nKV + j) * D + d];
  half *dq = upload(hq), *dk = upload(hk), *dv = upload(hv), *dvt = upload(hvt), *dm = upload(hm), *dp;
  float *ds, *dof, *doc;
  CK(cudaMalloc(&ds, (size_t)H * nQ * nKV * 4));
  CK(cudaMalloc(&dp, (size_t)H * nQ * nKV * 2));
  CK(cudaMalloc(&dof, (size_t)H * nQ * D * 4));
  CK(cudaMalloc(&doc, (size_t)H * nQ * D * 4));

  auto runFused = [&] { fused<<<dim3(nQ / ROWS, H), THREADS>>>(dq, dk, dv, dm, dof, nQ, nKV, H, HKV, scale); };
  auto runScores = [&] {
    product<<<dim3(nKV / BN, nQ / BM, H), MM_THREADS>>>(dq, dk, ds, nQ, nKV, D, (size_t)nQ * D, (size_t)nKV * D,
                                                         (size_t)nQ * nKV, H / HKV);
  };
  auto runSoftmax = [&] { softmax<<<H * nQ / 8, 256>>>(ds, dm, dp, nQ, nKV, scale); };
  auto runValues = [&] {
    product<<<dim3(D / BN, nQ / BM, H), MM_THREADS>>>(dp, dvt, doc, nQ, D, nKV, (size_t)nQ * nKV, (size_t)D * nKV,
                                                       (size_t)nQ * D, H / HKV);
  };
  auto runChain = [&] {
    runScores();
    runSoftmax();
    runValues();
  };
  runFused();
  runChain();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  // both against each other, and against a double-precision reference for a few rows
  std::vector<float> of((size_t)H * nQ * D), oc(of.size());
  CK(cudaMemcpy(of.data(), dof, of.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(oc.data(), doc, oc.size() * 4, cudaMemcpyDeviceToHost));
  double diff = 0, norm = 0;
  for (size_t x = 0; x < of.size(); x++) diff += (of[x] - oc[x]) * (double)(of[x] - oc[x]), norm += oc[x] * (double)oc[x];
  double errF = 0, errC = 0, ref2 = 0;
  for (int s = 0; s < 8; s++) {
    const int h = (s * 5) % H, i = (s * 613 + 7) % nQ, g = h / (H / HKV);
    std::vector<double> x(nKV);
    double mx = -INFINITY;
    for (int j = 0; j < nKV; j++) {
      double dot = 0;
      for (int d = 0; d < D; d++)
        dot += (double)__half2float(hq[((size_t)h * nQ + i) * D + d]) * __half2float(hk[((size_t)g * nKV + j) * D + d]);
      x[j] = dot * scale + __half2float(hm[(size_t)i * nKV + j]);
      mx = std::max(mx, x[j]);
    }
    double sum = 0;
    for (auto& v : x) sum += (v = exp(v - mx));
    for (int d = 0; d < D; d++) {
      double ref = 0;
      for (int j = 0; j < nKV; j++) ref += x[j] / sum * __half2float(hv[((size_t)g * nKV + j) * D + d]);
      const size_t at = ((size_t)h * nQ + i) * D + d;
      errF += (of[at] - ref) * (of[at] - ref), errC += (oc[at] - ref) * (oc[at] - ref), ref2 += ref * ref;
    }
  }
  printf("NMSE: fused against the chain %.1e; against the reference, 8 rows: fused %.1e, chain %.1e\n",
         diff / norm, errF / ref2, errC / ref2);

  const double flop = 4.0 * nQ * nKV * D * H;
  const double f = medianMs(runFused), c = medianMs(runChain);
  const double sc = medianMs(runScores), sm = medianMs(runSoftmax), va = medianMs(runValues);
  printf("fused (one pass, as flash_attn_tiles)  %.3f ms  %.1f TFLOP/s\n", f, flop / (f * 1e-3) / 1e12);
  printf("chain (S, softmax, P V)                %.3f ms  (S %.3f, softmax %.3f, P V %.3f)\n", c, sc, sm, va);
  printf("fused against the chain: %.2fx\n", c / f);
  return 0;
}

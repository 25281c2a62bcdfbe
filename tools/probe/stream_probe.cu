// stream_probe: the roofline of the replay step's state stream, measured
// without the rest of the step (no cursor, no records, no flush).
//
// A T = 1 non-flush replay step reads every state row once and forms one
// (Mamba-2: S_0·C_t) or two (GDN / KDA: S_0·q_t, S_0·k_t) dot products per
// row; everything else (history terms, decays) is small. This probe times
// exactly that GEMV over a slot-indexed pool larger than L2, next to a
// device-to-device copy of the same bytes, so a replay kernel's time can be
// read against what the stream alone can reach on this GPU.
//
//   replayssm_stream_probe [--batch 256] [--heads 128] [--rows 64] [--groups 8]
//                          [--state f32|bf16] [--nq 1|2] [--iters 50]
//
// Layout as the library's pools: state[slot][head][row][128 columns]; slots
// are a random permutation; queries [b][group][128] fp32; y [b][head][row].
// The check compares y against a host GEMV on a few rows.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/common.cuh"  // transpose_sum (the replay kernels' reduction)

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

namespace {

constexpr int NC = 128;  // columns per state row (N for Mamba-2, K for GDN / KDA)
constexpr int THREADS = 256;

__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <class ST> struct Vec;
template <> struct Vec<float> {
  static constexpr int E = 4;  // elements per 16-byte vector
  __device__ __forceinline__ static void widen(uint4 v, float* f) {
    f[0] = __uint_as_float(v.x); f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z); f[3] = __uint_as_float(v.w);
  }
};
template <> struct Vec<__nv_bfloat16> {
  static constexpr int E = 8;
  __device__ __forceinline__ static void widen(uint4 v, float* f) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
};

// One block: heads [h0, h0 + HB) of row b; warps take batches of RB·RPL rows
// (RPL rows per 16-byte load across the warp). y = dec·(S q_0) + hist (and
// y2 = S q_1 when NQ = 2).
template <class ST, int NQ, int RB, int MINB>
__global__ void __launch_bounds__(THREADS, MINB)
stream_kernel(const ST* __restrict__ pool, const int32_t* __restrict__ slots, const float* __restrict__ q,
              const float* __restrict__ dec, const float* __restrict__ hist, float* __restrict__ y,
              float* __restrict__ y2, int H, int P, int G, int HB) {
  constexpr int E = Vec<ST>::E, LPR = NC / E, RPL = 32 / LPR;
  const int nhb = H / HB;
  const int b = blockIdx.x / nhb, h0 = (blockIdx.x - b * nhb) * HB;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col = (lane % LPR) * E, sub = lane / LPR;
  const int64_t slot = slots[b];
  const int hpg = H / G;
  const int rows = HB * P;
  const ST* base = pool + ((slot * H + h0) * P) * int64_t(NC);
  // the query slice of the lane, per group (a block's heads share one group when HB | H/G)
  float qv[NQ][E];
  const int g = h0 / hpg;
#pragma unroll
  for (int k = 0; k < NQ; ++k)
#pragma unroll
    for (int e = 0; e < E; ++e) qv[k][e] = q[((int64_t(b) * G + g) * NQ + k) * NC + col + e];
  constexpr int BATCH = RB * RPL;  // rows per batch of a warp
  for (int r0 = warp * BATCH; r0 < rows; r0 += 8 * BATCH) {
    uint4 v[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) {
      const int r = r0 + i * RPL + sub;
      v[i] = ld_stream(base + int64_t(r) * NC + col);
    }
    float acc[NQ][RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) {
      float f[E];
      Vec<ST>::widen(v[i], f);
#pragma unroll
      for (int k = 0; k < NQ; ++k) {
        float a = 0.f;
#pragma unroll
        for (int e = 0; e < E; ++e) a = fmaf(f[e], qv[k][e], a);
        acc[k][i] = a;
      }
    }
#pragma unroll
    for (int k = 0; k < NQ; ++k) replayssm::cuda_util::transpose_sum<RB, LPR>(acc[k], lane % LPR);
    const int li = (lane % LPR) >> (__builtin_ctz(LPR) - __builtin_ctz(RB));
    if ((lane % (LPR / RB)) == 0) {
      const int r = r0 + li * RPL + sub;
      const int hl = r / P;
      const int64_t o = (int64_t(b) * H + h0) * P + r;
      y[o] = fmaf(dec[int64_t(b) * H + h0 + hl], acc[0][0], hist[o]);
      if (NQ == 2) y2[o] = acc[NQ - 1][0];
    }
  }
}

// Read-only roofline: sum of the pool's words (one 16-byte load per lane, RB in flight).
template <int RB>
__global__ void __launch_bounds__(THREADS) read_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* sink) {
  uint32_t s = 0;
  const int64_t stride = int64_t(gridDim.x) * THREADS;
  for (int64_t i0 = int64_t(blockIdx.x) * THREADS * RB + threadIdx.x; i0 < n; i0 += stride * RB) {
    uint4 v[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) v[i] = i0 + i * int64_t(THREADS) < n ? ld_stream(p + i0 + i * THREADS) : uint4{};
#pragma unroll
    for (int i = 0; i < RB; ++i) s ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
  }
  if (s == 0x9e3779b9u) *sink = s;
}

struct Args {
  int batch = 256, heads = 128, rows = 64, groups = 8, nq = 1, iters = 50;
  std::string state = "f32";
};

template <class F>
float time_ms(F&& f, int iters) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  f();
  CK(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < iters; ++i) f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms / iters);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

float bf16_to_f(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class ST, int NQ, int RB, int MINB>
void run_variant(const Args& A, const void* pool, const int32_t* slots, const float* q, const float* dec,
                 const float* hist, float* y, float* y2, int HB, double bytes, double copy_gbs,
                 const std::vector<int32_t>& hslots, const std::vector<float>& hq, const std::vector<float>& hdec,
                 const std::vector<float>& hhist) {
  constexpr int BATCH = RB * (32 / (NC / Vec<ST>::E));
  if ((HB * A.rows) % BATCH) return;
  const int grid = A.batch * (A.heads / HB);
  auto launch = [&] {
    stream_kernel<ST, NQ, RB, MINB><<<grid, THREADS>>>(static_cast<const ST*>(pool), slots, q, dec, hist, y, y2,
                                                       A.heads, A.rows, A.groups, HB);
  };
  const float ms = time_ms(launch, A.iters);
  CK(cudaGetLastError());
  // check a few rows against the host
  const int64_t ny = int64_t(A.batch) * A.heads * A.rows;
  std::vector<float> hy(ny), hy2(NQ == 2 ? ny : 0);
  CK(cudaMemcpy(hy.data(), y, ny * 4, cudaMemcpyDeviceToHost));
  if (NQ == 2) CK(cudaMemcpy(hy2.data(), y2, ny * 4, cudaMemcpyDeviceToHost));
  double maxerr = 0;
  std::mt19937 rng(7);
  const size_t esz = sizeof(ST);
  std::vector<uint8_t> row(NC * esz);
  for (int c = 0; c < 64; ++c) {
    const int b = rng() % A.batch, h = rng() % A.heads, r = rng() % A.rows;
    const int g = h / (A.heads / A.groups);
    const int64_t off = ((int64_t(hslots[b]) * A.heads + h) * A.rows + r) * NC;
    CK(cudaMemcpy(row.data(), static_cast<const uint8_t*>(pool) + off * esz, NC * esz, cudaMemcpyDeviceToHost));
    for (int k = 0; k < NQ; ++k) {
      double s = 0;
      for (int n = 0; n < NC; ++n) {
        float f;
        if (esz == 4) std::memcpy(&f, row.data() + 4 * n, 4);
        else { uint16_t u; std::memcpy(&u, row.data() + 2 * n, 2); f = bf16_to_f(u); }
        s += double(f) * hq[((int64_t(b) * A.groups + g) * NQ + k) * NC + n];
      }
      const int64_t o = (int64_t(b) * A.heads + h) * A.rows + r;
      const double want = k == 0 ? hdec[int64_t(b) * A.heads + h] * s + hhist[o] : s;
      const double got = k == 0 ? hy[o] : hy2[o];
      maxerr = std::max(maxerr, std::fabs(got - want) / (std::fabs(want) + 1e-3));
    }
  }
  const double gbs = bytes / (ms * 1e-3) / 1e9;
  std::printf(
      "{\"probe\":\"stream\",\"state\":\"%s\",\"nq\":%d,\"rb\":%d,\"minb\":%d,\"hb\":%d,\"batch\":%d,\"heads\":%d,"
      "\"rows\":%d,\"us\":%.1f,\"bytes\":%.0f,\"GBps\":%.0f,\"frac_copy\":%.3f,\"max_rel_err\":%.2e}\n",
      A.state.c_str(), NQ, RB, MINB, HB, A.batch, A.heads, A.rows, ms * 1e3, bytes, gbs, gbs / copy_gbs, maxerr);
  std::fflush(stdout);
}

template <class ST>
void run_all(const Args& A) {
  const int64_t per_slot = int64_t(A.heads) * A.rows * NC;
  const int nslots = A.batch + 7;
  const size_t pool_bytes = size_t(nslots) * per_slot * sizeof(ST);
  void* pool;
  CK(cudaMalloc(&pool, pool_bytes));
  {  // random values in [-1, 1] (bf16: the top half of an fp32)
    std::vector<uint8_t> h(size_t(per_slot) * sizeof(ST));
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int64_t i = 0; i < per_slot; ++i) {
      float f = u(rng);
      if (sizeof(ST) == 4) std::memcpy(h.data() + 4 * i, &f, 4);
      else { uint32_t w; std::memcpy(&w, &f, 4); uint16_t s = uint16_t(w >> 16); std::memcpy(h.data() + 2 * i, &s, 2); }
    }
    for (int s = 0; s < nslots; ++s)
      CK(cudaMemcpy(static_cast<uint8_t*>(pool) + size_t(s) * h.size(), h.data(), h.size(), cudaMemcpyHostToDevice));
  }
  std::vector<int32_t> hslots(nslots);
  std::iota(hslots.begin(), hslots.end(), 0);
  std::shuffle(hslots.begin(), hslots.end(), std::mt19937(3));
  hslots.resize(A.batch);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int NQ = A.nq;
  std::vector<float> hq(size_t(A.batch) * A.groups * NQ * NC), hdec(size_t(A.batch) * A.heads),
      hhist(size_t(A.batch) * A.heads * A.rows);
  for (auto& v : hq) v = u(rng);
  for (auto& v : hdec) v = 0.5f + 0.5f * u(rng);
  for (auto& v : hhist) v = u(rng);
  int32_t* slots;
  float *q, *dec, *hist, *y, *y2;
  CK(cudaMalloc(&slots, hslots.size() * 4));
  CK(cudaMalloc(&q, hq.size() * 4));
  CK(cudaMalloc(&dec, hdec.size() * 4));
  CK(cudaMalloc(&hist, hhist.size() * 4));
  CK(cudaMalloc(&y, hhist.size() * 4));
  CK(cudaMalloc(&y2, hhist.size() * 4));
  CK(cudaMemcpy(slots, hslots.data(), hslots.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(q, hq.data(), hq.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dec, hdec.data(), hdec.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(hist, hhist.data(), hhist.size() * 4, cudaMemcpyHostToDevice));

  const double sbytes = double(A.batch) * per_slot * sizeof(ST);
  // copy bandwidth: the batch's state bytes, device to device (read + write counted)
  void* dst;
  CK(cudaMalloc(&dst, size_t(sbytes)));
  const float cms = time_ms([&] { CK(cudaMemcpyAsync(dst, pool, size_t(sbytes), cudaMemcpyDeviceToDevice)); }, 20);
  const double copy_gbs = 2 * sbytes / (cms * 1e-3) / 1e9;
  std::printf("{\"probe\":\"copy\",\"bytes\":%.0f,\"us\":%.1f,\"GBps\":%.0f}\n", 2 * sbytes, cms * 1e3, copy_gbs);
  uint32_t* sink;
  CK(cudaMalloc(&sink, 4));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int mult : {4, 8}) {
    const int64_t n = int64_t(sbytes) / 16;
    const float rms = time_ms([&] { read_kernel<4><<<sms * mult, THREADS>>>(static_cast<const uint4*>(pool), n, sink); }, A.iters);
    const double gbs = sbytes / (rms * 1e-3) / 1e9;
    std::printf("{\"probe\":\"read\",\"blocks_per_sm\":%d,\"bytes\":%.0f,\"us\":%.1f,\"GBps\":%.0f,\"frac_copy\":%.3f}\n",
                mult, sbytes, rms * 1e3, gbs, gbs / copy_gbs);
  }
  const double bytes = sbytes + double(A.batch) * A.heads * A.rows * 4 * 2;  // + hist read, y write
  for (int HB : {1, 2, 4}) {
    if (A.heads % HB || (A.heads / A.groups) % HB) continue;
#define RV(RB, MINB)                                                                                       \
  if (NQ == 1)                                                                                             \
    run_variant<ST, 1, RB, MINB>(A, pool, slots, q, dec, hist, y, y2, HB, bytes, copy_gbs, hslots, hq, hdec, \
                                 hhist);                                                                   \
  else                                                                                                     \
    run_variant<ST, 2, RB, MINB>(A, pool, slots, q, dec, hist, y, y2, HB, bytes, copy_gbs, hslots, hq, hdec, hhist);
    RV(8, 4)
    RV(16, 2)
    RV(16, 3)
#undef RV
  }
  CK(cudaFree(pool));
  CK(cudaFree(dst));
}

}  // namespace

int main(int argc, char** argv) {
  Args A;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch") A.batch = std::stoi(v);
    else if (k == "--heads") A.heads = std::stoi(v);
    else if (k == "--rows") A.rows = std::stoi(v);
    else if (k == "--groups") A.groups = std::stoi(v);
    else if (k == "--nq") A.nq = std::stoi(v);
    else if (k == "--iters") A.iters = std::stoi(v);
    else if (k == "--state") A.state = v;
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  if (A.nq != 1 && A.nq != 2) { std::fprintf(stderr, "--nq must be 1 or 2\n"); return 2; }
  if (A.state == "f32") run_all<float>(A);
  else if (A.state == "bf16") run_all<__nv_bfloat16>(A);
  else { std::fprintf(stderr, "--state must be f32 or bf16\n"); return 2; }
  return 0;
}

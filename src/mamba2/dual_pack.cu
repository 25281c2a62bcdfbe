// Dual precision (design §4): the read copy of a Mamba-2 pool is refreshed
// here. Every block first lists the rows to pack (up to PACK_WINDOW rows at a
// time, all blocks the same list in row order), then the blocks walk the
// listed rows' (row, head) tiles, each tile [P, N] whole in shared memory (the
// NVFP4 tile scale is a block reduction). A step whose rows do not flush
// costs one read of the batch's slots and cursors per block.
//
//   fold = true (replay step): every block replays the row's cursor plan
//     (commit of num_accepted, flush rule; kernel_common.cuh::plan_from_cursor,
//     the helper the replay and cursor kernels use); only flushing rows are
//     listed. A flushing row folds its n committed records into the
//     checkpoint exactly as the single-precision replay kernel does
//       S_new = e^{Λ_n} S_0 + Σ_{j<n} δ_j e^{Λ_n − Λ_j} x_j B_jᵀ
//     (suffix_scan for the weights, the same fp32 operations, rounded to the
//     state dtype), writes S_new, and packs it into the copy. Cursors are not
//     moved: the replay kernel then sees the same plan, treats the row as
//     flushed (Params::dual) and the cursor kernel moves the cursor.
//   fold = false (prefill, flush, after their own kernels): the copy of every
//     valid row is re-packed from the checkpoint as it is.
//
// The pack is bit-identical to quant_pack (src/quant/quant.cu, README rules)
// of the stored checkpoint: the same device codecs (quant.cuh) on the values
// the checkpoint holds, padding bytes zero. A non-flush row writes nothing.
// Bad slots and cursors are skipped silently here; the replay / cursor
// kernels report them.
#include <algorithm>
#include <atomic>
#include <string>

#include "core/check.h"
#include "mamba2/launchers.cuh"
#include "mamba2/replay_kernel.cuh"
#include "quant/backend.h"
#include "quant/quant.cuh"

namespace replayssm::mamba2::kern {
namespace {

struct DualPackParams {
  Params m;
  DType rec = DType::f32;  // dtype of ring_x / ring_B
  uint8_t* copy = nullptr;
  int64_t cp_s = 0, cp_h = 0;  // bytes between slots / heads of the read copy
  ReadFormat format = ReadFormat::bf16;
  int64_t scale_off = 0, t_off = 0;
  quant::Gaps gaps;
  bool fold = false;
};

// Rows of the batch whose packing decisions one block holds at a time.
constexpr int PACK_WINDOW = 1024;

// Shared memory (4-byte words): tile [P·N], records x [L][P] and B [L][N],
// fold weights [L], the fold decay and a reduction scratch [40], the window's
// row list [PACK_WINDOW] and per-warp counts.
int64_t dual_pack_smem_words(int64_t P, int64_t N, int64_t L) {
  return P * N + L * (P + N) + L + 40 + PACK_WINDOW + KERNEL_WARPS;
}

// Largest finite |v| over the block (256 threads); every thread gets it.
__device__ float block_max(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = red[0];
#pragma unroll
  for (int w = 1; w < KERNEL_WARPS; ++w) v = fmaxf(v, red[w]);
  return v;
}

// quant_pack of one tile x [P, N] (shared memory, fp32 values) into `tile`.
__device__ void pack_tile(const DualPackParams& d, const float* x, uint8_t* tile, float* red) {
  const int P = d.m.P, N = d.m.N, tid = threadIdx.x;
#pragma unroll
  for (int g = 0; g < 3; ++g)
    for (int64_t b = d.gaps.begin[g] + tid; b < d.gaps.end[g]; b += KERNEL_THREADS) tile[b] = 0;
  switch (d.format) {
    case ReadFormat::bf16:
    case ReadFormat::f16: {
      uint16_t* codes = reinterpret_cast<uint16_t*>(tile);
      const bool bf = d.format == ReadFormat::bf16;
      for (int i = tid; i < P * N; i += KERNEL_THREADS)
        codes[i] = bf ? quant::dev::bf16_encode(x[i]) : quant::dev::f16_encode(x[i]);
      break;
    }
    case ReadFormat::fp8_e4m3: {
      const int nb = N / 32;
      for (int i = tid; i < P * nb; i += KERNEL_THREADS) {
        const int r = i / nb, b = i - r * nb;
        float v[32];
#pragma unroll
        for (int j = 0; j < 32; ++j) v[j] = x[r * N + b * 32 + j];
        uint32_t c[8];
        tile[d.scale_off + i] = quant::dev::fp8_encode_block(v, c);
        uint4* dst = reinterpret_cast<uint4*>(tile + int64_t(r) * N + b * 32);
        dst[0] = make_uint4(c[0], c[1], c[2], c[3]);
        dst[1] = make_uint4(c[4], c[5], c[6], c[7]);
      }
      break;
    }
    case ReadFormat::nvfp4: {
      float amax = 0.f;
      for (int i = tid; i < P * N; i += KERNEL_THREADS) amax = fmaxf(amax, quant::dev::finite_abs(x[i]));
      const float t = quant::dev::nvfp4_tensor_scale(block_max(amax, red));
      if (tid == 0) *reinterpret_cast<float*>(tile + d.t_off) = t;
      const int nb = N / 16;
      for (int i = tid; i < P * nb; i += KERNEL_THREADS) {
        const int r = i / nb, b = i - r * nb;
        float v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) v[j] = x[r * N + b * 16 + j];
        uint32_t c[2];
        tile[d.scale_off + i] = quant::dev::nvfp4_encode_block(v, t, c);
        *reinterpret_cast<uint2*>(tile + int64_t(r) * (N / 2) + b * 8) = make_uint2(c[0], c[1]);
      }
      break;
    }
  }
}

// Rows of one window of the batch that this call packs, in row order (every
// block builds the same list): fold = true, the rows whose plan flushes;
// otherwise every row with a valid slot.
__device__ int window_rows(const DualPackParams& d, int64_t w0, int* rows, int* wcount) {
  const Params& p = d.m;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int count = 0;
  for (int64_t base = w0; base < min(p.B, w0 + PACK_WINDOW); base += KERNEL_THREADS) {
    const int64_t b = base + tid;
    bool take = false;
    if (b < min(p.B, w0 + PACK_WINDOW)) {
      const int64_t slot = row_slot(p, b);
      int32_t bits = 0;
      if (check_slot(p, slot, &bits) == ROW_OK) {
        if (d.fold) {
          const int64_t acc = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
          StepPlan plan;
          take = plan_from_cursor(p, load_cursor(p, slot), acc, &plan, &bits) == ROW_OK && plan.flush;
        } else {
          take = true;
        }
      }
    }
    const unsigned m = __ballot_sync(0xffffffffu, take);
    if (lane == 0) wcount[warp] = __popc(m);
    __syncthreads();
    int off = count, total = count;
    for (int w = 0; w < KERNEL_WARPS; ++w) {
      off += w < warp ? wcount[w] : 0;
      total += wcount[w];
    }
    if (take) rows[off + __popc(m & ((1u << lane) - 1u))] = int(b - w0);
    __syncthreads();
    count = total;
  }
  return count;
}

// Blocks walk the (row, head) tiles of the rows to pack, PACK_WINDOW rows at
// a time (grid-stride over tiles).
template <DType SD>
__global__ void __launch_bounds__(KERNEL_THREADS) mamba2_dual_pack_kernel(const DualPackParams d) {
  using st_t = typename Traits<SD>::type;
  constexpr int VEC = VecOf<SD>::value;
  constexpr int U = 4;  // 16-byte state vectors in flight per thread
  const Params& p = d.m;
  extern __shared__ float4 smem4[];
  const int P = p.P, N = p.N, L = d.fold ? p.L : 0, tid = threadIdx.x, lane = tid & 31;
  float* tile = reinterpret_cast<float*>(smem4);  // [P][N]
  float* xs = tile + P * N;                       // [L][P]
  float* Bs = xs + L * P;                         // [L][N]
  float* fw = Bs + L * N;                         // [L]
  float* red = fw + L;                            // [32]; red[32] = fold decay
  int* rows = reinterpret_cast<int*>(red + 40);   // [PACK_WINDOW]
  int* wcount = rows + PACK_WINDOW;               // [KERNEL_WARPS]
  const int nvr = (N + VEC - 1) / VEC, nvec = P * nvr;
  for (int64_t w0 = 0; w0 < p.B; w0 += PACK_WINDOW) {
    const int count = window_rows(d, w0, rows, wcount);
    for (int64_t item = blockIdx.x; item < int64_t(count) * p.H; item += gridDim.x) {
      const int64_t b = w0 + rows[item / p.H];
      const int h = int(item % p.H);
      const int64_t slot = row_slot(p, b);
      st_t* Sh = static_cast<st_t*>(p.state) + slot * p.st_s + int64_t(h) * p.st_h;
      int n = 0, start = 0;
      if (d.fold) {
        const int64_t acc = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
        int32_t bits = 0;
        StepPlan plan;
        plan_from_cursor(p, load_cursor(p, slot), acc, &plan, &bits);  // flushes (listed)
        n = plan.fold_count;
        start = plan.fold_start;
        const int g = h / p.hpg;
        for (int i = tid; i < n * P; i += KERNEL_THREADS) {
          const int j = i / P, pr = i - j * P;
          xs[i] = cuda_util::load_any(p.rx, d.rec, slot * p.rx_s + int64_t(ring_pos(start, j, p.R)) * p.rx_r +
                                                        int64_t(h) * p.rx_h + pr);
        }
        for (int i = tid; i < n * N; i += KERNEL_THREADS) {
          const int j = i / N, k = i - j * N;
          Bs[i] = cuda_util::load_any(p.rB, d.rec, slot * p.rB_s + int64_t(ring_pos(start, j, p.R)) * p.rB_r +
                                                        int64_t(g) * p.rB_g + k);
        }
        if (tid < 32) {  // fw_j = δ_j e^{A Σ_{j<i<n} δ_i}, fdec = e^{A Σ_{i<n} δ_i}
          const float A = A_of(p, h);
          auto dl = [&](int j) { return p.rdt[slot * p.rdt_s + int64_t(ring_pos(start, j, p.R)) * p.rdt_r + h]; };
          const float tot = suffix_scan(dl, 0, n - 1, lane, [&](int j, float s) { fw[j] = dl(j) * expf(A * s); });
          if (lane == 0) red[32] = expf(A * tot);
        }
        __syncthreads();
      }
      const float fd = d.fold ? red[32] : 1.f;
      for (int base = tid; base < nvec; base += U * KERNEL_THREADS) {
        float v[U][VEC];
#pragma unroll
        for (int u = 0; u < U; ++u) {  // issue every load first
          const int i = base + u * KERNEL_THREADS, pr = i / nvr;
          if (i < nvec) load_row_vec<SD>(Sh + int64_t(pr) * p.st_p, (i - pr * nvr) * VEC, N, v[u], true);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int i = base + u * KERNEL_THREADS, pr = i / nvr, c = (i - pr * nvr) * VEC;
          if (i >= nvec) continue;
          if (d.fold) {
#pragma unroll
            for (int e = 0; e < VEC; ++e) v[u][e] *= fd;
            for (int j = 0; j < n; ++j) {
              const float wx = fw[j] * xs[j * P + pr];
#pragma unroll
              for (int e = 0; e < VEC; ++e)
                if (c + e < N) v[u][e] = fmaf(1.f, v[u][e], wx * Bs[j * N + c + e]);
            }
            round_to_state<SD, VEC>(v[u]);
            store_row_vec<SD>(Sh + int64_t(pr) * p.st_p, c, N, v[u]);
          }
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            if (c + e < N) tile[pr * N + c + e] = v[u][e];
        }
      }
      __syncthreads();
      pack_tile(d, tile, d.copy + slot * d.cp_s + int64_t(h) * d.cp_h, red);
      __syncthreads();
    }
  }
}

template <DType SD>
void run_pack(const DualPackParams& d, unsigned grid, size_t smem, cudaStream_t stream, const char* fn) {
  static std::atomic<size_t> raised{48 * 1024};
  if (smem > raised.load()) {
    cuda_util::check(cudaFuncSetAttribute(mamba2_dual_pack_kernel<SD>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                     fn, "shared memory size");
    raised.store(smem);
  }
  mamba2_dual_pack_kernel<SD><<<grid, KERNEL_THREADS, smem, stream>>>(d);
  cuda_util::check_launch(fn);
}

}  // namespace

void launch_dual_pack(const char* fn, const Params& p, const Tensor& read_copy, ReadFormat format,
                      DType state, DType rec, bool fold, int sms, int smem_optin, int smem_per_sm,
                      cudaStream_t stream) {
  if (p.B == 0) return;
  const QuantLayout lay = quant_layout(format, p.P, p.N);
  DualPackParams d;
  d.m = p;
  d.rec = rec;
  d.copy = static_cast<uint8_t*>(read_copy.data);
  d.cp_s = read_copy.stride[0];
  d.cp_h = read_copy.stride[1];
  d.format = format;
  d.scale_off = lay.scale_offset;
  d.t_off = lay.tensor_scale_offset;
  d.gaps = quant::padding_gaps(lay);
  d.fold = fold;
  const int64_t smem = 4 * dual_pack_smem_words(p.P, p.N, fold ? p.L : 0);
  check::require(smem <= smem_optin, fn, "pool.read_copy",
                 "the dual-precision pack stages a whole [P, N] tile (" + std::to_string(smem) +
                     " bytes of shared memory), the device offers " + std::to_string(smem_optin));
  // As many resident blocks as shared memory allows (at most 8 per SM); the
  // blocks walk the tiles of the rows that pack.
  const int per_sm = int(std::clamp<int64_t>(smem_per_sm / (smem + 1024), 1, 8));
  const unsigned grid = unsigned(std::clamp<int64_t>(p.B * p.H, 1, int64_t(per_sm) * sms));
  switch (state) {
    case DType::f32: return run_pack<DType::f32>(d, grid, size_t(smem), stream, fn);
    case DType::f16: return run_pack<DType::f16>(d, grid, size_t(smem), stream, fn);
    case DType::bf16: return run_pack<DType::bf16>(d, grid, size_t(smem), stream, fn);
    default: check::fail(fn, "state", std::string("unsupported state dtype ") + dtype_name(state));
  }
}

}  // namespace replayssm::mamba2::kern

// CUDA backend of the causal conv1d. One thread per (row, channel); threads
// of a warp cover consecutive channels, so every row access is coalesced.
//
// Step, per row b with slot s and history offset a (the previous step's
// accepted count, 0 when nothing is pending):
//   u = conv_state[s, a : a + W − 1, c] ++ x[b, :, c]
//   out[b, t, c] = act(bias[c] + Σ_{i<W} weight[c, i] · u[t + i])
//   conv_state[s, 0 : W − 1, c] ← u[0 : W − 1],  conv_state[s, W − 1 + t, c] ← x[b, t, c]
// The thread reads its W − 1 history values into registers before it writes
// any row, so the in-place shift is safe; the window slides in registers
// with the newest value at index WMAX − 1 (compile-time indices only).
// conv_pending is rewritten by a second launch, after every block of the row
// has read it.
//
// Slots and accepted counts live on the device: a bad slot, or an accepted
// count outside [1, pending] (also: any count for a row with nothing
// pending), skips the row (no writes at all) and ORs
// STATUS_BAD_SLOT / STATUS_BAD_ACCEPTED into exec.device_status. Prefill
// rows whose cu_seqlens entries are malformed are skipped with STATUS_BAD_SLOT.
//
// Commit, per row b with slot s and accepted count a (the same plan and
// checks as a step given num_accepted):
//   conv_state[s, 0 : W − 1, c] ← conv_state[s, a : a + W − 1, c],  pending[s] ← 0
// in one launch with one block per row (see conv1d_commit_kernel).
#include <algorithm>
#include <type_traits>

#include "conv1d/backend.h"
#include "cuda/common.cuh"

namespace replayssm::conv1d::cuda {
namespace {

using cuda_util::load_any;
using cuda_util::load_index;
using cuda_util::report;
using cuda_util::store_any;

constexpr int THREADS = 128;
constexpr int64_t MAX_GRID_Y = 65535;

__device__ __forceinline__ float activate(float v, bool silu) {
  return silu ? v / (1.f + __expf(-v)) : v;
}

struct UpdateParams {
  const void* x;
  int64_t x_sb, x_st;
  void* out;
  int64_t out_sb, out_st;
  const void* weight;
  DType w_dt;
  int64_t w_sc, w_si;
  const void* bias;  // may be null
  DType b_dt;
  int64_t b_s;
  const void* slot;
  DType slot_dt;
  int64_t slot_s;
  const int32_t* num_accepted;  // may be null
  int64_t na_s;
  void* state;
  int64_t st_ss, st_sr;
  int32_t* pending;
  int64_t pend_s;
  int64_t B, T, dim, W, S, T_max, pad;
  bool silu;
  int32_t* status;
};

enum RowKind : int { ROW_OK, ROW_PAD, ROW_BAD };
struct RowPlan {
  int kind;
  int32_t bad;  // StatusBit when kind == ROW_BAD
  int64_t s;    // slot
  int64_t a;    // history offset
};

// What row b of a step does; every thread of the row computes the same plan.
__device__ __forceinline__ RowPlan plan_row(const UpdateParams& p, int64_t b) {
  RowPlan r{ROW_OK, 0, load_index(p.slot, p.slot_dt, b * p.slot_s), 0};
  if (r.s == p.pad) return {ROW_PAD, 0, r.s, 0};
  if (r.s < 0 || r.s >= p.S) return {ROW_BAD, STATUS_BAD_SLOT, r.s, 0};
  const int64_t pend = p.pending[r.s * p.pend_s];
  if (pend == 0) {  // fresh row: nothing to commit, so no accepted count may be given
    if (p.num_accepted) return {ROW_BAD, STATUS_BAD_ACCEPTED, r.s, 0};
    return r;
  }
  const int64_t a = p.num_accepted ? int64_t(p.num_accepted[b * p.na_s]) : pend;
  if (pend < 0 || pend > p.T_max || a < 1 || a > pend) return {ROW_BAD, STATUS_BAD_ACCEPTED, r.s, 0};
  r.a = a;
  return r;
}

// Weights right-aligned in a window of WMAX: wr[WMAX − W + i] = weight[c, i], else 0.
template <int WMAX>
__device__ __forceinline__ void load_weights(const void* w, DType dt, int64_t sc, int64_t si,
                                             int64_t c, int64_t W, float (&wr)[WMAX]) {
#pragma unroll
  for (int j = 0; j < WMAX; ++j) {
    const int64_t i = j - (WMAX - W);
    wr[j] = i >= 0 ? load_any(w, dt, c * sc + i * si) : 0.f;
  }
}

template <DType XD, DType SD, int WMAX>
__global__ void __launch_bounds__(THREADS) conv1d_update_kernel(UpdateParams p) {
  using XT = cuda_util::Traits<XD>;
  using ST = cuda_util::Traits<SD>;
  using X = typename XT::type;
  using St = typename ST::type;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  float wr[WMAX];
  float bias = 0.f;
  if (c < p.dim) {
    load_weights<WMAX>(p.weight, p.w_dt, p.w_sc, p.w_si, c, p.W, wr);
    if (p.bias) bias = load_any(p.bias, p.b_dt, c * p.b_s);
  }
  for (int64_t b = blockIdx.y; b < p.B; b += gridDim.y) {
    const RowPlan r = plan_row(p, b);
    if (r.kind == ROW_BAD) {
      if (c == 0) report(p.status, r.bad);
      continue;
    }
    if (c >= p.dim) continue;
    X* out = static_cast<X*>(p.out) + b * p.out_sb + c;
    if (r.kind == ROW_PAD) {
      for (int64_t t = 0; t < p.T; ++t) out[t * p.out_st] = XT::store(0.f);
      continue;
    }
    St* col = static_cast<St*>(p.state) + r.s * p.st_ss + c;
    const X* x = static_cast<const X*>(p.x) + b * p.x_sb + c;
    // History u[0 : W − 1] at win[WMAX − W : WMAX − 1], read before any write.
    float win[WMAX];
#pragma unroll
    for (int j = 0; j < WMAX; ++j) {
      const int64_t i = j - (WMAX - p.W);
      win[j] = (i >= 0 && j < WMAX - 1) ? ST::load(col[(r.a + i) * p.st_sr]) : 0.f;
    }
    if (r.a != 0) {
#pragma unroll
      for (int j = 0; j < WMAX - 1; ++j) {
        const int64_t i = j - (WMAX - p.W);
        if (i >= 0) col[i * p.st_sr] = ST::store(win[j]);
      }
    }
    for (int64_t t = 0; t < p.T; ++t) {
      const X xr = x[t * p.x_st];
      win[WMAX - 1] = XT::load(xr);
      float acc = bias;
#pragma unroll
      for (int j = 0; j < WMAX; ++j)
        if (j >= WMAX - p.W) acc += wr[j] * win[j];
      out[t * p.out_st] = XT::store(activate(acc, p.silu));
      col[(p.W - 1 + t) * p.st_sr] = ST::store(win[WMAX - 1]);
#pragma unroll
      for (int j = 0; j < WMAX - 1; ++j) win[j] = win[j + 1];
    }
  }
}

// pending[s] ← T for every row the update kernel processed.
__global__ void conv1d_pending_kernel(UpdateParams p) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= p.B) return;
  const RowPlan r = plan_row(p, b);
  if (r.kind == ROW_OK) p.pending[r.s * p.pend_s] = int32_t(p.T);
}

// Commit: one block per row (grid-stride over rows), its threads striding
// over the channels. Thread 0 alone reads the row's slot, pending and
// accepted counts (plan_row), publishes the plan in shared memory and then
// zeroes pending[s]; the other threads use the shared plan and never read
// conv_pending. Non-pad slots of a call are distinct (the caller's contract,
// checked on the host backends), so no other block reads pending[s] either:
// the zeroing cannot race with a check, and a single launch suffices. Each
// thread moves only its own channels, rows in ascending order: row a + i > i
// is read before row i is written, and the rows still to be read lie above
// every row written. The stored bits are copied (E: uint32_t for f32,
// uint16_t for f16 / bf16), so the commit is exact in every dtype and works
// for any W. The second barrier keeps the plan until every thread is done.
constexpr int COMMIT_THREADS = 256;

template <class E>
__global__ void __launch_bounds__(COMMIT_THREADS) conv1d_commit_kernel(UpdateParams p) {
  __shared__ RowPlan plan;
  for (int64_t b = blockIdx.x; b < p.B; b += gridDim.x) {
    if (threadIdx.x == 0) {
      plan = plan_row(p, b);
      if (plan.kind == ROW_BAD) report(p.status, plan.bad);
      else if (plan.kind == ROW_OK) p.pending[plan.s * p.pend_s] = 0;
    }
    __syncthreads();
    const RowPlan r = plan;
    if (r.kind == ROW_OK) {
      E* col = static_cast<E*>(p.state) + r.s * p.st_ss;
      for (int64_t c = threadIdx.x; c < p.dim; c += blockDim.x)
        for (int64_t i = 0; i < p.W - 1; ++i) col[i * p.st_sr + c] = col[(r.a + i) * p.st_sr + c];
    }
    __syncthreads();
  }
}

struct PrefillParams {
  const void* x;
  int64_t x_st;
  void* out;
  int64_t out_st;
  const void* weight;
  DType w_dt;
  int64_t w_sc, w_si;
  const void* bias;
  DType b_dt;
  int64_t b_s;
  const void* cu;
  DType cu_dt;
  int64_t cu_s;
  const void* slot;
  DType slot_dt;
  int64_t slot_s;
  const int32_t* initial;  // may be null
  int64_t init_s;
  void* state;
  DType st_dt;
  int64_t st_ss, st_sr;
  int32_t* pending;
  int64_t pend_s;
  int64_t B, tokens, dim, W, S, pad;
  bool silu;
  int32_t* status;
};

// Row b's token range, slot and kind (ROW_BAD for malformed offsets or slots).
struct PrefillRow {
  int kind;
  int64_t begin, end, s;
  bool initial;
};
__device__ __forceinline__ PrefillRow prefill_row(const PrefillParams& p, int64_t b) {
  PrefillRow r;
  r.begin = load_index(p.cu, p.cu_dt, b * p.cu_s);
  r.end = load_index(p.cu, p.cu_dt, (b + 1) * p.cu_s);
  r.s = load_index(p.slot, p.slot_dt, b * p.slot_s);
  r.initial = p.initial && p.initial[b * p.init_s] != 0;
  r.kind = ROW_OK;
  if (r.begin < 0 || r.end < r.begin || r.end > p.tokens) r.kind = ROW_BAD;
  else if (r.s == p.pad) r.kind = ROW_PAD;
  else if (r.s < 0 || r.s >= p.S) r.kind = ROW_BAD;
  return r;
}

constexpr int64_t PREFILL_TOKENS = 16;  // tokens per block of the output kernel

// Outputs: block (channel block, token tile); the thread walks its tile's
// tokens, finding each token's row from cu_seqlens. Stream index of input i of
// token tok is q = tok − begin + i: history (q < W − 1, zero unless initial),
// else x[begin + q − (W − 1)].
template <DType XD, int WMAX>
__global__ void __launch_bounds__(THREADS) conv1d_prefill_out_kernel(PrefillParams p) {
  using XT = cuda_util::Traits<XD>;
  using X = typename XT::type;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= p.dim) return;
  float wr[WMAX];
  load_weights<WMAX>(p.weight, p.w_dt, p.w_sc, p.w_si, c, p.W, wr);
  const float bias = p.bias ? load_any(p.bias, p.b_dt, c * p.b_s) : 0.f;
  const X* x = static_cast<const X*>(p.x);
  X* out = static_cast<X*>(p.out);
  const int64_t H = p.W - 1;
  for (int64_t t0 = int64_t(blockIdx.y) * PREFILL_TOKENS; t0 < p.tokens;
       t0 += int64_t(gridDim.y) * PREFILL_TOKENS) {
    // Largest b with cu[b] <= t0 (binary search), then advanced per token.
    int64_t lo = 0, hi = p.B - 1;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (load_index(p.cu, p.cu_dt, mid * p.cu_s) <= t0) lo = mid; else hi = mid - 1;
    }
    int64_t b = lo;
    PrefillRow r = prefill_row(p, b);
    const int64_t t1 = t0 + PREFILL_TOKENS < p.tokens ? t0 + PREFILL_TOKENS : p.tokens;
    for (int64_t tok = t0; tok < t1; ++tok) {
      while (b + 1 < p.B && load_index(p.cu, p.cu_dt, (b + 1) * p.cu_s) <= tok) r = prefill_row(p, ++b);
      if (r.kind == ROW_BAD || tok < r.begin || tok >= r.end) {
        if (c == 0) report(p.status, STATUS_BAD_SLOT);
        continue;
      }
      if (r.kind == ROW_PAD) {
        out[tok * p.out_st + c] = XT::store(0.f);
        continue;
      }
      float acc = bias;
#pragma unroll
      for (int j = 0; j < WMAX; ++j) {
        const int64_t i = j - (WMAX - p.W);
        if (i < 0) continue;
        const int64_t q = tok - r.begin + i;
        float v;
        if (q >= H) v = XT::load(x[(r.begin + q - H) * p.x_st + c]);
        else v = r.initial ? load_any(p.state, p.st_dt, r.s * p.st_ss + q * p.st_sr + c) : 0.f;
        acc += wr[j] * v;
      }
      out[tok * p.out_st + c] = XT::store(activate(acc, p.silu));
    }
  }
}

// State after the prompt: rows [0, W − 1) ← stream[len : len + W − 1]. Row j
// reads row len + j > j (when it comes from the history), so ascending j
// reads every row before overwriting it. Runs after the output kernel.
template <DType XD>
__global__ void __launch_bounds__(THREADS) conv1d_prefill_state_kernel(PrefillParams p) {
  using XT = cuda_util::Traits<XD>;
  using X = typename XT::type;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t H = p.W - 1;
  const X* x = static_cast<const X*>(p.x);
  for (int64_t b = blockIdx.y; b < p.B; b += gridDim.y) {
    const PrefillRow r = prefill_row(p, b);
    if (r.kind == ROW_BAD) {
      if (c == 0) report(p.status, STATUS_BAD_SLOT);
      continue;
    }
    if (r.kind == ROW_PAD || c >= p.dim) continue;
    const int64_t len = r.end - r.begin, col = r.s * p.st_ss + c;
    for (int64_t j = 0; j < H; ++j) {
      const int64_t q = len + j;
      float v;
      if (q >= H) v = XT::load(x[(r.begin + q - H) * p.x_st + c]);
      else v = r.initial ? load_any(p.state, p.st_dt, col + q * p.st_sr) : 0.f;
      store_any(p.state, p.st_dt, col + j * p.st_sr, v);
    }
    if (c == 0) p.pending[r.s * p.pend_s] = 0;
  }
}

// One explicit dispatch over the activation dtype and the window bound.
template <class F>
void dispatch_x(DType xd, F&& f) {
  switch (xd) {
    case DType::f32: f(std::integral_constant<DType, DType::f32>{}); break;
    case DType::f16: f(std::integral_constant<DType, DType::f16>{}); break;
    default: f(std::integral_constant<DType, DType::bf16>{}); break;
  }
}
template <class F>
void dispatch_w(int64_t W, F&& f) {
  if (W <= 4) f(std::integral_constant<int, 4>{});
  else f(std::integral_constant<int, int(CUDA_MAX_W)>{});
}

unsigned blocks(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

// The parameters a step and a commit share: the rows' slots and accepted
// counts, the state, the pending counts, the sizes and the status word.
UpdateParams row_params(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot, int64_t pad_slot_id,
                        const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  UpdateParams p{};
  p.slot = slot.data;
  p.slot_dt = slot.dtype;
  p.slot_s = slot.stride[0];
  p.num_accepted = static_cast<const int32_t*>(num_accepted.data);
  p.na_s = num_accepted.defined() ? num_accepted.stride[0] : 0;
  p.state = conv_state.data;
  p.st_ss = conv_state.stride[0];
  p.st_sr = conv_state.stride[1];
  p.pending = static_cast<int32_t*>(conv_pending.data);
  p.pend_s = conv_pending.stride[0];
  p.B = d.B;
  p.dim = d.dim;
  p.W = d.W;
  p.S = d.S;
  p.T_max = d.T_max();
  p.pad = pad_slot_id;
  p.status = exec.device_status;
  return p;
}

}  // namespace

void update(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,
            const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  static constexpr const char* FN = "conv1d_update";
  cuda_util::require_supported_device(FN);
  UpdateParams p = row_params(conv_state, conv_pending, step.slot, step.pad_slot_id, num_accepted, d, exec);
  p.x = step.x.data;
  p.x_sb = step.x.stride[0];
  p.x_st = step.x.stride[1];
  p.out = step.out.data;
  p.out_sb = step.out.stride[0];
  p.out_st = step.out.stride[1];
  p.weight = step.weight.data;
  p.w_dt = step.weight.dtype;
  p.w_sc = step.weight.stride[0];
  p.w_si = step.weight.stride[1];
  p.bias = step.bias.data;
  p.b_dt = step.bias.dtype;
  p.b_s = step.bias.defined() ? step.bias.stride[0] : 0;
  p.T = d.T;
  p.silu = step.silu;
  const cudaStream_t stream = cuda_util::stream_of(exec);
  const dim3 grid(blocks(d.dim, THREADS), unsigned(std::min(d.B, MAX_GRID_Y)));
  dispatch_x(step.x.dtype, [&](auto xtag) {
    constexpr DType XD = decltype(xtag)::value;
    dispatch_w(d.W, [&](auto wtag) {
      constexpr int WMAX = decltype(wtag)::value;
      switch (conv_state.dtype) {
        case DType::f32: conv1d_update_kernel<XD, DType::f32, WMAX><<<grid, THREADS, 0, stream>>>(p); break;
        case DType::f16: conv1d_update_kernel<XD, DType::f16, WMAX><<<grid, THREADS, 0, stream>>>(p); break;
        default: conv1d_update_kernel<XD, DType::bf16, WMAX><<<grid, THREADS, 0, stream>>>(p); break;
      }
    });
  });
  cuda_util::check_launch(FN);
  conv1d_pending_kernel<<<blocks(d.B, THREADS), THREADS, 0, stream>>>(p);
  cuda_util::check_launch(FN);
}

void prefill(const Conv1dPrefill& pf, const Tensor& conv_state, const Tensor& conv_pending,
             const Dims& d, const Exec& exec) {
  static constexpr const char* FN = "conv1d_prefill";
  cuda_util::require_supported_device(FN);
  PrefillParams p{};
  p.x = pf.x.data;
  p.x_st = pf.x.stride[0];
  p.out = pf.out.data;
  p.out_st = pf.out.stride[0];
  p.weight = pf.weight.data;
  p.w_dt = pf.weight.dtype;
  p.w_sc = pf.weight.stride[0];
  p.w_si = pf.weight.stride[1];
  p.bias = pf.bias.data;
  p.b_dt = pf.bias.dtype;
  p.b_s = pf.bias.defined() ? pf.bias.stride[0] : 0;
  p.cu = pf.cu_seqlens.data;
  p.cu_dt = pf.cu_seqlens.dtype;
  p.cu_s = pf.cu_seqlens.stride[0];
  p.slot = pf.slot.data;
  p.slot_dt = pf.slot.dtype;
  p.slot_s = pf.slot.stride[0];
  p.initial = static_cast<const int32_t*>(pf.initial.data);
  p.init_s = pf.initial.defined() ? pf.initial.stride[0] : 0;
  p.state = conv_state.data;
  p.st_dt = conv_state.dtype;
  p.st_ss = conv_state.stride[0];
  p.st_sr = conv_state.stride[1];
  p.pending = static_cast<int32_t*>(conv_pending.data);
  p.pend_s = conv_pending.stride[0];
  p.B = d.B;
  p.tokens = d.tokens;
  p.dim = d.dim;
  p.W = d.W;
  p.S = d.S;
  p.pad = pf.pad_slot_id;
  p.silu = pf.silu;
  p.status = exec.device_status;
  const cudaStream_t stream = cuda_util::stream_of(exec);
  const unsigned bx = blocks(d.dim, THREADS);
  dispatch_x(pf.x.dtype, [&](auto xtag) {
    constexpr DType XD = decltype(xtag)::value;
    if (d.tokens > 0) {
      const dim3 grid(bx, unsigned(std::min((d.tokens + PREFILL_TOKENS - 1) / PREFILL_TOKENS, MAX_GRID_Y)));
      dispatch_w(d.W, [&](auto wtag) {
        conv1d_prefill_out_kernel<XD, decltype(wtag)::value><<<grid, THREADS, 0, stream>>>(p);
      });
      cuda_util::check_launch(FN);
    }
    const dim3 grid(bx, unsigned(std::min(d.B, MAX_GRID_Y)));
    conv1d_prefill_state_kernel<XD><<<grid, THREADS, 0, stream>>>(p);
    cuda_util::check_launch(FN);
  });
}

void commit(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot,
            int64_t pad_slot_id, const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  static constexpr const char* FN = "conv1d_commit";
  cuda_util::require_supported_device(FN);
  const UpdateParams p = row_params(conv_state, conv_pending, slot, pad_slot_id, num_accepted, d, exec);
  const cudaStream_t stream = cuda_util::stream_of(exec);
  const unsigned grid = unsigned(std::min(d.B, MAX_GRID_Y));
  if (conv_state.dtype == DType::f32)
    conv1d_commit_kernel<uint32_t><<<grid, COMMIT_THREADS, 0, stream>>>(p);
  else
    conv1d_commit_kernel<uint16_t><<<grid, COMMIT_THREADS, 0, stream>>>(p);
  cuda_util::check_launch(FN);
}

}  // namespace replayssm::conv1d::cuda

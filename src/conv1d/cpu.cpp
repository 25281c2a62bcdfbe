// Fast CPU backend of the causal conv1d: fp32 arithmetic, multithreaded over
// (row, block of CB channels). Within a block the stream u of one row is
// staged as rows of CB fp32 values so the channel loop vectorises:
//   out[t, c] = act(bias[c] + Σ_{i<W} wT[i, c] · u[t + i, c]),
// summed in the order i = 0 … W − 1 (the same order as the CUDA kernel).
// The transposed weights live in the call's shared workspace, each item's
// staged stream in its worker's slab.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "conv1d/backend.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/parallel.h"

namespace replayssm::conv1d::cpu {
namespace {

constexpr int64_t CB = 64;   // channels per work item
constexpr int64_t TC = 64;   // prefill tokens staged at a time

// Weights transposed to [W, dim] and bias [dim], both fp32, in the call's
// shared workspace.
struct Weights {
  float *wT, *bias;
};
Weights carve_weights(Carver& c, const Dims& d) {
  return Weights{c.take<float>(d.W * d.dim), c.take<float>(d.dim)};
}
void load_weights(const Weights& w, const Tensor& weight, const Tensor& b, const Dims& d) {
  for (int64_t c = 0; c < d.dim; ++c) {
    for (int64_t i = 0; i < d.W; ++i)
      w.wT[i * d.dim + c] =
          float(load_as_f64(weight.data, weight.dtype, c * weight.stride[0] + i * weight.stride[1]));
    w.bias[c] = b.defined() ? float(load_as_f64(b.data, b.dtype, c * b.stride[0])) : 0.f;
  }
}
// Per-thread staged stream of one work item: [(W − 1 + n), CB] with n = T
// (update) or TC (prefill).
float* carve_stream(Carver& c, const Dims& d, int64_t n) { return c.take<float>((d.W - 1 + n) * CB); }

inline float activate(float v, bool silu) { return silu ? v / (1.f + std::exp(-v)) : v; }

// Outputs t ∈ [0, n) of channels [c0, c0 + nc) from a staged stream u
// [(W − 1 + n), CB]; output row t is written at out + t * out_stride.
template <class X, class Conv>
void convolve_block(const float* u, int64_t n, int64_t nc, int64_t c0, const Weights& w,
                    const Dims& d, bool silu, X* out, int64_t out_stride) {
  float acc[CB];
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < nc; ++k) acc[k] = w.bias[c0 + k];
    for (int64_t i = 0; i < d.W; ++i) {
      const float* wi = w.wT + i * d.dim + c0;
      const float* ui = u + (t + i) * CB;
      for (int64_t k = 0; k < nc; ++k) acc[k] += wi[k] * ui[k];
    }
    X* o = out + t * out_stride;
    for (int64_t k = 0; k < nc; ++k) o[k] = Conv::store(activate(acc[k], silu));
  }
}

template <DType XD, DType SD>
void update_impl(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,
                 const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  using XC = Storage<XD>;
  using SC = Storage<SD>;
  using X = typename XC::type;
  using St = typename SC::type;
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(Conv1dOp::update, d, threads));
  Carver shared = cs.shared();
  const Weights w = carve_weights(shared, d);
  load_weights(w, step.weight, step.bias, d);
  const int64_t H = d.W - 1, nblk = (d.dim + CB - 1) / CB;
  const auto* pending = static_cast<const int32_t*>(conv_pending.data);
  const auto* x = static_cast<const X*>(step.x.data);
  auto* out = static_cast<X*>(step.out.data);
  auto* state = static_cast<St*>(conv_state.data);

  parallel_for_workers(d.B * nblk, threads, [&](int worker, int64_t item) {
    const int64_t b = item / nblk, c0 = (item % nblk) * CB, nc = std::min(CB, d.dim - c0);
    const int64_t s = check::index_at(step.slot, b);
    X* ob = out + b * step.out.stride[0] + c0;
    if (s == step.pad_slot_id) {
      for (int64_t t = 0; t < d.T; ++t)
        for (int64_t k = 0; k < nc; ++k) ob[t * step.out.stride[1] + k] = XC::store(0.f);
      return;
    }
    const int64_t p = pending[s * conv_pending.stride[0]];
    const int64_t a = p == 0 ? 0 : (num_accepted.defined() ? check::index_at(num_accepted, b) : p);
    Carver c = cs.slab(worker);
    float* u = carve_stream(c, d, d.T);
    St* sb = state + s * conv_state.stride[0] + c0;
    for (int64_t i = 0; i < H; ++i)
      for (int64_t k = 0; k < nc; ++k) u[i * CB + k] = SC::load(sb[(a + i) * conv_state.stride[1] + k]);
    const X* xb = x + b * step.x.stride[0] + c0;
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t k = 0; k < nc; ++k) u[(H + t) * CB + k] = XC::load(xb[t * step.x.stride[1] + k]);
    convolve_block<X, XC>(u, d.T, nc, c0, w, d, step.silu, ob, step.out.stride[1]);
    // rows [0, W − 1) ← history, rows [W − 1, W − 1 + T) ← the step's inputs
    for (int64_t r = 0; r < H + d.T; ++r)
      for (int64_t k = 0; k < nc; ++k) sb[r * conv_state.stride[1] + k] = SC::store(u[r * CB + k]);
  });
  // Pending counts change only after every block of a row has read them.
  auto* pend = static_cast<int32_t*>(conv_pending.data);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(step.slot, b);
    if (s != step.pad_slot_id) pend[s * conv_pending.stride[0]] = int32_t(d.T);
  }
}

template <DType XD, DType SD>
void prefill_impl(const Conv1dPrefill& p, const Tensor& conv_state, const Tensor& conv_pending,
                  const Dims& d, const Exec& exec) {
  using XC = Storage<XD>;
  using SC = Storage<SD>;
  using X = typename XC::type;
  using St = typename SC::type;
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(Conv1dOp::prefill, d, threads));
  Carver shared = cs.shared();
  const Weights w = carve_weights(shared, d);
  load_weights(w, p.weight, p.bias, d);
  const int64_t H = d.W - 1, nblk = (d.dim + CB - 1) / CB;
  const auto* x = static_cast<const X*>(p.x.data);
  auto* out = static_cast<X*>(p.out.data);
  auto* state = static_cast<St*>(conv_state.data);

  parallel_for_workers(d.B * nblk, threads, [&](int worker, int64_t item) {
    const int64_t b = item / nblk, c0 = (item % nblk) * CB, nc = std::min(CB, d.dim - c0);
    const int64_t begin = check::index_at(p.cu_seqlens, b), end = check::index_at(p.cu_seqlens, b + 1);
    const int64_t s = check::index_at(p.slot, b);
    if (s == p.pad_slot_id) {
      for (int64_t t = begin; t < end; ++t)
        for (int64_t k = 0; k < nc; ++k) out[t * p.out.stride[0] + c0 + k] = XC::store(0.f);
      return;
    }
    const bool initial = p.initial.defined() && check::index_at(p.initial, b) != 0;
    // u holds the last W − 1 stream values followed by up to TC new tokens.
    Carver c = cs.slab(worker);
    float* u = carve_stream(c, d, TC);
    std::fill(u, u + H * CB, 0.f);  // history of a prompt without `initial`
    St* sb = state + s * conv_state.stride[0] + c0;
    if (initial)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t k = 0; k < nc; ++k) u[i * CB + k] = SC::load(sb[i * conv_state.stride[1] + k]);
    for (int64_t t0 = begin; t0 < end; t0 += TC) {
      const int64_t n = std::min(TC, end - t0);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < nc; ++k)
          u[(H + t) * CB + k] = XC::load(x[(t0 + t) * p.x.stride[0] + c0 + k]);
      convolve_block<X, XC>(u, n, nc, c0, w, d, p.silu, out + t0 * p.out.stride[0] + c0,
                            p.out.stride[0]);
      // Keep the last W − 1 stream values as the next chunk's history.
      std::copy(u + n * CB, u + (n + H) * CB, u);
    }
    for (int64_t i = 0; i < H; ++i)
      for (int64_t k = 0; k < nc; ++k) sb[i * conv_state.stride[1] + k] = SC::store(u[i * CB + k]);
  });
  auto* pend = static_cast<int32_t*>(conv_pending.data);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(p.slot, b);
    if (s != p.pad_slot_id) pend[s * conv_pending.stride[0]] = 0;
  }
}

// One explicit dispatch over (activation dtype, state dtype).
template <template <DType, DType> class F, class... Args>
void dispatch(DType xd, DType sd, Args&&... args) {
  auto with_state = [&](auto xtag) {
    constexpr DType XD = decltype(xtag)::value;
    switch (sd) {
      case DType::f32: F<XD, DType::f32>::run(args...); break;
      case DType::f16: F<XD, DType::f16>::run(args...); break;
      default: F<XD, DType::bf16>::run(args...); break;
    }
  };
  switch (xd) {
    case DType::f32: with_state(std::integral_constant<DType, DType::f32>{}); break;
    case DType::f16: with_state(std::integral_constant<DType, DType::f16>{}); break;
    default: with_state(std::integral_constant<DType, DType::bf16>{}); break;
  }
}

template <DType XD, DType SD> struct Update {
  template <class... A> static void run(A&&... a) { update_impl<XD, SD>(a...); }
};
template <DType XD, DType SD> struct Prefill {
  template <class... A> static void run(A&&... a) { prefill_impl<XD, SD>(a...); }
};

}  // namespace

WorkspacePlan workspace_plan(Conv1dOp op, const Dims& d, int threads) {
  WorkspacePlan plan;
  plan.threads = threads;
  if (op == Conv1dOp::commit) return plan;  // moves rows in place: no scratch
  Carver shared, slab;
  carve_weights(shared, d);
  carve_stream(slab, d, op == Conv1dOp::update ? d.T : TC);
  plan.shared = shared.used();
  plan.per_thread = slab.used();
  return plan;
}

void update(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,
            const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  dispatch<Update>(step.x.dtype, conv_state.dtype, step, conv_state, conv_pending, num_accepted, d,
                   exec);
}

void prefill(const Conv1dPrefill& p, const Tensor& conv_state, const Tensor& conv_pending,
             const Dims& d, const Exec& exec) {
  dispatch<Prefill>(p.x.dtype, conv_state.dtype, p, conv_state, conv_pending, d, exec);
}

// Rows [0, W − 1) ← rows [a, a + W − 1) of each committed slot, as stored
// bytes (no dtype dispatch): one memmove of the dim contiguous channels per
// row, in ascending row order (row a + i > i is read before row i is written,
// and rows still to be read lie above every row written). The work items
// never read conv_pending, so zeroing it afterwards needs no ordering.
void commit(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot,
            int64_t pad, const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  const int64_t H = d.W - 1, esize = int64_t(dtype_size(conv_state.dtype));
  const int64_t row_bytes = d.dim * esize;
  auto* state = static_cast<char*>(conv_state.data);
  // Chunks of at least ~64 KiB moved per thread hand-off.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, H * row_bytes));
  parallel_for(d.B, cpu_threads(exec.num_threads), [&](int64_t b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) return;
    const int64_t a = check::index_at(num_accepted, b);
    char* sb = state + s * conv_state.stride[0] * esize;
    for (int64_t i = 0; i < H; ++i)
      std::memmove(sb + i * conv_state.stride[1] * esize, sb + (a + i) * conv_state.stride[1] * esize,
                   size_t(row_bytes));
  }, grain);
  auto* pend = static_cast<int32_t*>(conv_pending.data);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s != pad) pend[s * conv_pending.stride[0]] = 0;
  }
}

}  // namespace replayssm::conv1d::cpu

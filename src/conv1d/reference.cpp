// CPU oracle of the causal conv1d: plain loops, fp64 arithmetic on exactly
// widened inputs. Shares no arithmetic with the fast CPU or CUDA paths.
//
// For one row and channel c the input stream is u = history (W − 1 values)
// followed by the new inputs; output t is
//   out[t] = act(bias[c] + Σ_{i<W} weight[c, i] · u[t + i]).
#include <cmath>
#include <cstring>
#include <vector>

#include "conv1d/backend.h"
#include "core/check.h"
#include "core/dtype.h"

namespace replayssm::conv1d::reference {
namespace {

double activate(double v, bool silu) { return silu ? v / (1.0 + std::exp(-v)) : v; }

// Element (i, j, k) of a 3-d view, (i, j) of a 2-d view.
int64_t at3(const Tensor& t, int64_t i, int64_t j, int64_t k) {
  return i * t.stride[0] + j * t.stride[1] + k * t.stride[2];
}
int64_t at2(const Tensor& t, int64_t i, int64_t j) { return i * t.stride[0] + j * t.stride[1]; }

double weight_at(const Tensor& w, int64_t c, int64_t i) {
  return load_as_f64(w.data, w.dtype, at2(w, c, i));
}
double bias_at(const Tensor& bias, int64_t c) {
  return bias.defined() ? load_as_f64(bias.data, bias.dtype, c * bias.stride[0]) : 0.0;
}

// out[t] for every t of a stream u of length W − 1 + n.
void convolve(const std::vector<double>& u, int64_t n, const Tensor& weight, const Tensor& bias,
              int64_t c, bool silu, int64_t W, std::vector<double>& out) {
  out.assign(size_t(n), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    double acc = bias_at(bias, c);
    for (int64_t i = 0; i < W; ++i) acc += weight_at(weight, c, i) * u[size_t(t + i)];
    out[size_t(t)] = activate(acc, silu);
  }
}

}  // namespace

void update(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,
            const Tensor& num_accepted, const Dims& d) {
  const int64_t H = d.W - 1;  // history length
  std::vector<double> u(size_t(H + d.T)), out;
  auto* pending = static_cast<int32_t*>(conv_pending.data);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(step.slot, b);
    if (s == step.pad_slot_id) {
      for (int64_t t = 0; t < d.T; ++t)
        for (int64_t c = 0; c < d.dim; ++c)
          store_from_f64(step.out.data, step.out.dtype, at3(step.out, b, t, c), 0.0);
      continue;
    }
    const int64_t p = pending[s * conv_pending.stride[0]];
    // Offset of the history: the accepted count of the previous step.
    const int64_t a = p == 0 ? 0 : (num_accepted.defined() ? check::index_at(num_accepted, b) : p);
    for (int64_t c = 0; c < d.dim; ++c) {
      for (int64_t i = 0; i < H; ++i)
        u[size_t(i)] = load_as_f64(conv_state.data, conv_state.dtype, at3(conv_state, s, a + i, c));
      for (int64_t t = 0; t < d.T; ++t)
        u[size_t(H + t)] = load_as_f64(step.x.data, step.x.dtype, at3(step.x, b, t, c));
      convolve(u, d.T, step.weight, step.bias, c, step.silu, d.W, out);
      for (int64_t t = 0; t < d.T; ++t)
        store_from_f64(step.out.data, step.out.dtype, at3(step.out, b, t, c), out[size_t(t)]);
      // rows [0, W − 1) ← history, rows [W − 1, W − 1 + T) ← this step's inputs
      for (int64_t r = 0; r < H + d.T; ++r)
        store_from_f64(conv_state.data, conv_state.dtype, at3(conv_state, s, r, c), u[size_t(r)]);
    }
    pending[s * conv_pending.stride[0]] = int32_t(d.T);
  }
}

void prefill(const Conv1dPrefill& p, const Tensor& conv_state, const Tensor& conv_pending,
             const Dims& d) {
  const int64_t H = d.W - 1;
  std::vector<double> u, out;
  auto* pending = static_cast<int32_t*>(conv_pending.data);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t begin = check::index_at(p.cu_seqlens, b), end = check::index_at(p.cu_seqlens, b + 1);
    const int64_t n = end - begin;
    const int64_t s = check::index_at(p.slot, b);
    if (s == p.pad_slot_id) {
      for (int64_t t = begin; t < end; ++t)
        for (int64_t c = 0; c < d.dim; ++c)
          store_from_f64(p.out.data, p.out.dtype, at2(p.out, t, c), 0.0);
      continue;
    }
    const bool initial = p.initial.defined() && check::index_at(p.initial, b) != 0;
    u.assign(size_t(H + n), 0.0);
    for (int64_t c = 0; c < d.dim; ++c) {
      for (int64_t i = 0; i < H; ++i)
        u[size_t(i)] = initial ? load_as_f64(conv_state.data, conv_state.dtype, at3(conv_state, s, i, c))
                               : 0.0;
      for (int64_t t = 0; t < n; ++t)
        u[size_t(H + t)] = load_as_f64(p.x.data, p.x.dtype, at2(p.x, begin + t, c));
      convolve(u, n, p.weight, p.bias, c, p.silu, d.W, out);
      for (int64_t t = 0; t < n; ++t)
        store_from_f64(p.out.data, p.out.dtype, at2(p.out, begin + t, c), out[size_t(t)]);
      // rows [0, W − 1) ← the last W − 1 values of the stream
      for (int64_t i = 0; i < H; ++i)
        store_from_f64(conv_state.data, conv_state.dtype, at3(conv_state, s, i, c), u[size_t(n + i)]);
    }
    pending[s * conv_pending.stride[0]] = 0;
  }
}

void commit(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot,
            int64_t pad_slot_id, const Tensor& num_accepted, const Dims& d) {
  const int64_t H = d.W - 1;
  const size_t esize = dtype_size(conv_state.dtype);
  auto* state = static_cast<char*>(conv_state.data);
  auto* pending = static_cast<int32_t*>(conv_pending.data);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad_slot_id) continue;
    const int64_t a = check::index_at(num_accepted, b);
    // rows [0, W − 1) ← rows [a, a + W − 1), bytes as stored. Ascending i:
    // row i is written after row a + i > i was read, and the rows still to be
    // read (a + j, j > i) lie above every row written so far.
    for (int64_t c = 0; c < d.dim; ++c)
      for (int64_t i = 0; i < H; ++i)
        std::memcpy(state + at3(conv_state, s, i, c) * int64_t(esize),
                    state + at3(conv_state, s, a + i, c) * int64_t(esize), esize);
    pending[s * conv_pending.stride[0]] = 0;
  }
}

}  // namespace replayssm::conv1d::reference

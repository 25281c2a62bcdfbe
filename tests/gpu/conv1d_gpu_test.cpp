// Causal conv1d and slot operations on the CUDA backend: cuda against the
// reference under random speculative schedules (NaN-poisoned outputs, pad
// rows, prefill mid-schedule), commit then one update against the cpu
// backend and the split calls, device-side error reporting, slot copy/zero
// against the CPU versions. Every test skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "conv1d_test_util.h"
#include "core/slot_ops.h"
#include "cuda/runtime.h"
#include "gpu/gpu_util.h"

namespace replayssm::test {
namespace {

// An int32 status word in device memory, zeroed.
class DeviceStatus {
 public:
  DeviceStatus() {
    if (cudaMalloc(reinterpret_cast<void**>(&ptr_), sizeof(int32_t)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    cudaMemset(ptr_, 0, sizeof(int32_t));
  }
  ~DeviceStatus() { cudaFree(ptr_); }
  int32_t* get() const { return ptr_; }

 private:
  int32_t* ptr_ = nullptr;
};

Exec cuda_exec(const DeviceStatus& st) {
  Exec e;
  e.backend = Backend::cuda;
  e.device_status = st.get();
  return e;
}

Conv1dStep device_step(const ConvConfig& c, const DeviceTensor& x, const DeviceTensor& weight,
                       const DeviceTensor& bias, const DeviceTensor& slot, const DeviceTensor& out) {
  Conv1dStep s;
  s.x = x.t();
  s.weight = weight.t();
  if (c.bias) s.bias = bias.t();
  s.silu = c.silu;
  s.slot = slot.t();
  s.out = out.t();
  return s;
}

struct PrefillArgs {
  std::vector<int64_t> cu, slots, initial;
};

// Runs a random schedule on the reference (host) and cuda (device) pools in
// lockstep; outputs must agree within the dtype's tolerance and conv_state /
// conv_pending must be byte-identical (the state holds copies of inputs).
// in_arena: the device conv_state and conv_pending are pieces of one
// SlotArena (slot strides of gigabytes, the last slots past 2^31 elements,
// the state's rows followed by row_pad elements: odd strides), whose guard
// bands and row padding must stay untouched.
void run_gpu_schedule(const ConvConfig& c, uint64_t seed, int steps, bool in_arena = false, int64_t row_pad = 0) {
  std::mt19937_64 rng(seed);
  const ConvWeights w(c, rng);
  const DeviceTensor d_weight(w.weight);
  DeviceTensor d_bias;
  if (c.bias) d_bias.upload(w.bias);
  ConvSchedule sched(c.S, c.T_max);
  ConvPool ref(c);
  ref.state.fill_uniform(rng, -1, 1);  // stale content must not leak
  DeviceTensor dense_state, dense_pending;
  std::unique_ptr<SlotArena> arena;
  if (in_arena) {
    arena = std::make_unique<SlotArena>(c.S, cuda_arena_memory());
    arena->add(c.state_dtype, {c.R(), c.dim}, size_t(row_pad) * dtype_size(c.state_dtype));
    arena->add(DType::i32, {});
    arena->allocate();
    arena->upload(0, ref.state);
    arena->upload(1, ref.pending);
  } else {
    dense_state.upload(ref.state);
    dense_pending.upload(ref.pending);
  }
  const Tensor d_state = in_arena ? arena->view(0) : dense_state.t();
  const Tensor d_pending = in_arena ? arena->view(1) : dense_pending.t();
  const DeviceStatus status;
  const Exec ex = cuda_exec(status);
  const double tol = tolerance(c.x_dtype);

  auto compare_pools = [&](const char* what, int step) {
    const HostTensor st = in_arena ? arena->download(0) : dense_state.to_host();
    const HostTensor pe = in_arena ? arena->download(1) : dense_pending.to_host();
    EXPECT_TRUE(st.bytes_equal(ref.state)) << what << " step " << step;
    EXPECT_TRUE(pe.bytes_equal(ref.pending)) << what << " step " << step;
    if (arena) arena->expect_guards(what);
  };
  auto prefill = [&](const PrefillArgs& a, int step) {
    HostTensor x(c.x_dtype, {a.cu.back(), c.dim}), out(c.x_dtype, {a.cu.back(), c.dim});
    x.fill_uniform(rng, -2, 2);
    out.fill_nan();
    const HostTensor cu = index_tensor(a.cu), slot = index_tensor(a.slots),
                     init = index_tensor(a.initial);
    const DeviceTensor dx(x), dout(out), dcu(cu), dslot(slot), dinit(init);
    Conv1dPrefill p;
    p.x = x.t();
    p.weight = w.weight.t();
    if (c.bias) p.bias = w.bias.t();
    p.silu = c.silu;
    p.cu_seqlens = cu.t();
    p.slot = slot.t();
    p.initial = init.t();
    p.out = out.t();
    conv1d_prefill(p, ref.state, ref.pending, Exec{Backend::reference});
    p.x = dx.t();
    p.weight = d_weight.t();
    if (c.bias) p.bias = d_bias.t();
    p.cu_seqlens = dcu.t();
    p.slot = dslot.t();
    p.initial = dinit.t();
    p.out = dout.t();
    conv1d_prefill(p, d_state, d_pending, ex);
    ASSERT_NO_THROW(check_device_status(ex, "prefill"));
    EXPECT_LE(rel_err(dout.to_host().to_f64(), out.to_f64()), tol) << "prefill step " << step;
    compare_pools("prefill", step);
    for (int64_t s : a.slots)
      if (s >= 0) sched.prefilled(s);
  };

  PrefillArgs first;
  first.cu = {0};
  for (int64_t s = 0; s < c.S; ++s) {
    first.cu.push_back(first.cu.back() + int64_t(rng() % 40));
    first.slots.push_back(s % 4 == 3 ? -1 : s);
    first.initial.push_back(int64_t(rng() % 2));
  }
  prefill(first, -1);

  for (int step = 0; step < steps; ++step) {
    const ConvStepSpec spec = sched.next(rng, 6);
    const int64_t B = int64_t(spec.slots.size());
    HostTensor x(c.x_dtype, {B, spec.T, c.dim}), out(c.x_dtype, {B, spec.T, c.dim});
    x.fill_uniform(rng, -2, 2);
    out.fill_nan();
    const HostTensor slot = index_tensor(spec.slots), acc = accepted_tensor(spec);
    const DeviceTensor dx(x), dout(out), dslot(slot);
    DeviceTensor dacc;
    if (spec.accepted) dacc.upload(acc);
    conv1d_update(make_conv_step(c, x, w, slot, out), ref.state, ref.pending, acc,
                  Exec{Backend::reference});
    conv1d_update(device_step(c, dx, d_weight, d_bias, dslot, dout), d_state, d_pending,
                  spec.accepted ? dacc.t() : Tensor{}, ex);
    ASSERT_NO_THROW(check_device_status(ex, "update"));
    ASSERT_LE(rel_err(dout.to_host().to_f64(), out.to_f64()), tol)
        << "step " << step << " T " << spec.T;
    compare_pools("update", step);
    if (step % 10 == 9) {
      PrefillArgs mid;
      const int64_t s0 = int64_t(rng() % uint64_t(c.S));
      mid.cu = {0, int64_t(rng() % 3), 0};
      mid.cu[2] = mid.cu[1] + int64_t(rng() % 100);
      mid.slots = {s0, (s0 + 1) % c.S};
      mid.initial = {1, int64_t(rng() % 2)};
      prefill(mid, step);
    }
  }
}

TEST(Conv1dGpu, RequireSupportedDevice) {
  RSSM_SKIP_WITHOUT_GPU();
  EXPECT_NO_THROW(cuda_util::require_supported_device("Conv1dGpu"));
  EXPECT_NO_THROW(cuda_util::require_supported_device("Conv1dGpu"));  // cached
}

TEST(Conv1dGpu, ScheduleF32W4) {
  RSSM_SKIP_WITHOUT_GPU();
  run_gpu_schedule({9, 300, 4, 8}, 101, 40);
}
TEST(Conv1dGpu, ScheduleBf16W3) {
  RSSM_SKIP_WITHOUT_GPU();
  run_gpu_schedule({8, 130, 3, 8, DType::bf16, DType::bf16, DType::bf16}, 102, 40);
}
TEST(Conv1dGpu, ScheduleF16ActF32StateW7) {
  RSSM_SKIP_WITHOUT_GPU();
  run_gpu_schedule({6, 77, 7, 5, DType::f16, DType::f32, DType::f16}, 103, 40);
}
TEST(Conv1dGpu, ScheduleW2NoBiasNoSilu) {
  RSSM_SKIP_WITHOUT_GPU();
  ConvConfig c{5, 64, 2, 8, DType::f32, DType::bf16, DType::f32};
  c.bias = false;
  c.silu = false;
  run_gpu_schedule(c, 104, 40);
}
TEST(Conv1dGpu, ModelShapeBf16) {
  RSSM_SKIP_WITHOUT_GPU();
  run_gpu_schedule({40, 10240 + 2048, 4, 8, DType::bf16, DType::bf16, DType::bf16}, 105, 12);
}
// The same at fp32 and bf16 states in a slot arena, dense rows and rows
// followed by one element (odd strides).
TEST(Conv1dGpu, ArenaPools) {
  RSSM_SKIP_WITHOUT_GPU();
  run_gpu_schedule({40, 10240 + 2048, 4, 8, DType::bf16, DType::bf16, DType::bf16}, 106, 12, true);
  run_gpu_schedule({12, 10240, 4, 8, DType::bf16, DType::f32, DType::f32}, 108, 20, true);
  run_gpu_schedule({12, 10240 + 2048, 4, 8, DType::bf16, DType::bf16, DType::bf16}, 110, 12, true, 1);
  run_gpu_schedule({12, 10240, 4, 8, DType::bf16, DType::f32, DType::f32}, 112, 12, true, 1);
}

// A slot outside [0, S) or an accepted count outside [1, pending] skips the
// row, leaves every byte of the pool alone, and is reported once.
TEST(Conv1dGpu, DeviceStatusReportsBadRows) {
  RSSM_SKIP_WITHOUT_GPU();
  ConvConfig c{4, 50, 4, 5};
  std::mt19937_64 rng(107);
  const ConvWeights w(c, rng);
  const DeviceTensor d_weight(w.weight), d_bias(w.bias);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  pool.pending.set(1, 3);
  DeviceTensor d_state(pool.state), d_pending(pool.pending);
  const DeviceStatus status;
  const Exec ex = cuda_exec(status);
  HostTensor x(c.x_dtype, {2, 2, c.dim}), out(c.x_dtype, {2, 2, c.dim});
  x.fill_uniform(rng, -1, 1);
  const DeviceTensor dx(x), dout(out);

  struct Case {
    std::vector<int64_t> slots, accepted;
    const char* name;
  };
  for (const Case& k : {Case{{-1, 7}, {1, 1}, "STATUS_BAD_SLOT"},
                        Case{{-1, 1}, {1, 4}, "STATUS_BAD_ACCEPTED"},
                        Case{{-1, 1}, {1, 0}, "STATUS_BAD_ACCEPTED"},
                        Case{{0, -1}, {2, 1}, "STATUS_BAD_ACCEPTED"}}) {  // slot 0: nothing pending
    const DeviceTensor dslot(index_tensor(k.slots)), dacc(index_tensor(k.accepted));
    conv1d_update(device_step(c, dx, d_weight, d_bias, dslot, dout), d_state, d_pending,
                  dacc.t(), ex);
    try {
      check_device_status(ex, "conv1d_update");
      ADD_FAILURE() << "no status for " << k.name;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "device_status");
      EXPECT_NE(std::string(e.what()).find(k.name), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(check_device_status(ex, "conv1d_update"));  // cleared
    EXPECT_TRUE(d_state.to_host().bytes_equal(pool.state)) << k.name;
    EXPECT_TRUE(d_pending.to_host().bytes_equal(pool.pending)) << k.name;
  }
}

// conv1d_commit then one update without num_accepted on a batch that mixes
// pending, fresh and pad rows: the cuda commit equals the cpu commit byte for
// byte (state and pending), the cuda update after it equals the cpu update
// (outputs within tolerance, state and pending bytes), and its outputs and
// state are byte-identical to the cuda split calls. In a second call, rows
// the device must reject (slot out of range, accepted count 0 or above
// pending, a count for a fresh row, a corrupt pending count) are skipped
// with every byte of their slots kept and reported, while the good row of
// the same call is committed.
TEST(Conv1dGpu, CommitMatchesCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  const ConvConfig configs[] = {{9, 300, 4, 8},
                                {8, 130, 3, 8, DType::bf16, DType::bf16, DType::bf16},
                                {7, 77, 7, 5, DType::f16, DType::f16, DType::f16},
                                {6, 64, 2, 4, DType::f32, DType::bf16, DType::f32}};
  uint64_t seed = 111;
  for (const ConvConfig& c : configs) {
    for (int rep = 0; rep < 2; ++rep, ++seed) {
      std::mt19937_64 rng(seed);
      const ConvWeights w(c, rng);
      const DeviceTensor d_weight(w.weight);
      DeviceTensor d_bias;
      if (c.bias) d_bias.upload(w.bias);
      ConvPool cpu(c);
      cpu.state.fill_uniform(rng, -1, 1);
      const MixedBatch m =
          mixed_batch(rng, c.S, c.T_max, [&](int64_t s, int64_t p) { cpu.pending.set(s, double(p)); });
      HostTensor x(c.x_dtype, {m.B(), m.T, c.dim}), out(c.x_dtype, {m.B(), m.T, c.dim});
      x.fill_uniform(rng, -2, 2);
      out.fill_nan();
      const HostTensor slot = index_tensor(m.slots), pend = index_tensor(m.pending, DType::i64),
                       fresh = index_tensor(m.fresh), acc = index_tensor(m.accepted);
      const DeviceTensor dx(x), dslot(slot), dpend(pend), dfresh(fresh), dacc(acc);
      DeviceTensor d_state(cpu.state), d_pending(cpu.pending), s_state(cpu.state),
          s_pending(cpu.pending), d_out(out), s_out_p(out), s_out_f(out);
      const DeviceStatus status;
      const Exec ex = cuda_exec(status);
      const std::string where = "seed " + std::to_string(seed);

      conv1d_commit(cpu.state, cpu.pending, pend, -1, acc, c.W, Exec{Backend::cpu});
      conv1d_commit(d_state, d_pending, dpend, -1, dacc, c.W, ex);
      ASSERT_NO_THROW(check_device_status(ex, "conv1d_commit")) << where;
      EXPECT_TRUE(d_state.to_host().bytes_equal(cpu.state)) << where << " commit";
      EXPECT_TRUE(d_pending.to_host().bytes_equal(cpu.pending)) << where << " commit";

      conv1d_update(make_conv_step(c, x, w, slot, out), cpu.state, cpu.pending, {}, Exec{Backend::cpu});
      conv1d_update(device_step(c, dx, d_weight, d_bias, dslot, d_out), d_state, d_pending, {}, ex);
      // The split calls on the device.
      conv1d_update(device_step(c, dx, d_weight, d_bias, dpend, s_out_p), s_state, s_pending, dacc, ex);
      conv1d_update(device_step(c, dx, d_weight, d_bias, dfresh, s_out_f), s_state, s_pending, {}, ex);
      ASSERT_NO_THROW(check_device_status(ex, "conv1d_update")) << where;
      const HostTensor got = d_out.to_host(), got_p = s_out_p.to_host(), got_f = s_out_f.to_host();
      EXPECT_LE(rel_err(got.to_f64(), out.to_f64()), tolerance(c.x_dtype)) << where;
      EXPECT_TRUE(d_state.to_host().bytes_equal(cpu.state)) << where << " update";
      EXPECT_TRUE(d_pending.to_host().bytes_equal(cpu.pending)) << where << " update";
      EXPECT_TRUE(s_state.to_host().bytes_equal(cpu.state)) << where << " split";
      EXPECT_TRUE(s_pending.to_host().bytes_equal(cpu.pending)) << where << " split";
      const size_t row = size_t(m.T * c.dim) * dtype_size(c.x_dtype);
      for (int64_t b = 0; b < m.B(); ++b)
        EXPECT_EQ(std::memcmp(got.as<char>() + size_t(b) * row,
                              (m.fresh[size_t(b)] >= 0 ? got_f : got_p).as<char>() + size_t(b) * row, row),
                  0) << where << " row " << b;
    }
  }

  // Device-side rejection: slots 0..4 pending {3, 0, 2, 9 (> T_max), 4}.
  ConvConfig c{6, 50, 4, 5};
  std::mt19937_64 rng(117);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  const int64_t pend[] = {3, 0, 2, 9, 4, 1};
  for (int64_t s = 0; s < c.S; ++s) pool.pending.set(s, double(pend[s]));
  DeviceTensor d_state(pool.state), d_pending(pool.pending);
  const DeviceStatus status;
  const Exec ex = cuda_exec(status);
  // rows: bad slot, good (slot 4, a = 2), a = 0, a > pending, fresh slot, corrupt pending, pad
  const DeviceTensor dslot(index_tensor({c.S + 3, 4, 0, 2, 1, 3, -1}, DType::i64)),
      dacc(index_tensor({1, 2, 0, 3, 1, 1, 0}));
  conv1d_commit(d_state, d_pending, dslot, -1, dacc, c.W, ex);
  try {
    check_device_status(ex, "conv1d_commit");
    ADD_FAILURE() << "bad rows not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "device_status");
    EXPECT_NE(std::string(e.what()).find("STATUS_BAD_SLOT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("STATUS_BAD_ACCEPTED"), std::string::npos) << e.what();
  }
  const HostTensor good_slot = index_tensor({4}), good_acc = index_tensor({2});
  conv1d_commit(pool.state, pool.pending, good_slot, -1, good_acc, c.W, Exec{Backend::cpu});
  EXPECT_TRUE(d_state.to_host().bytes_equal(pool.state));
  EXPECT_TRUE(d_pending.to_host().bytes_equal(pool.pending));
  EXPECT_EQ(pool.pending.get(4), 0.0);
}

// Pool tensors of slot_ops tests: dense rows of several word widths and a
// row that is not dense (generic strided path).
struct SlotPool {
  std::vector<HostTensor> host;  // backing allocations
  std::vector<Tensor> views(const std::vector<void*>& bases, Device dev) const {
    std::vector<Tensor> v;
    v.push_back(Tensor::view(bases[0], DType::f32, {S, 3, 5}, dev));
    v.push_back(Tensor::strided(bases[1], DType::bf16, {S, 4, 6}, {48, 6, 1}, dev));  // layer 0 of [S, 2, 4, 6]
    v.push_back(Tensor::strided(static_cast<uint16_t*>(bases[1]) + 24, DType::bf16, {S, 4, 3},
                                {48, 6, 1}, dev));  // half rows of layer 1: not dense
    v.push_back(Tensor::view(bases[2], DType::i32, {S, 3}, dev));
    v.push_back(Tensor::view(bases[3], DType::u8, {S, 7}, dev));
    v.push_back(Tensor{});  // absent tensors are skipped
    return v;
  }
  int64_t S = 6;
  SlotPool(std::mt19937_64& rng) {
    host.emplace_back(DType::f32, std::vector<int64_t>{S, 3, 5});
    host.emplace_back(DType::bf16, std::vector<int64_t>{S, 2, 4, 6});
    host.emplace_back(DType::i32, std::vector<int64_t>{S, 3});
    host.emplace_back(DType::u8, std::vector<int64_t>{S, 7});
    for (auto& h : host) h.fill_uniform(rng, 1, 100);
  }
};

TEST(Conv1dGpu, SlotOpsMatchCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(109);
  SlotPool cpu(rng);
  std::vector<DeviceTensor> dev(cpu.host.size());
  std::vector<void*> hb, db;
  for (size_t i = 0; i < cpu.host.size(); ++i) {
    dev[i].upload(cpu.host[i]);
    hb.push_back(cpu.host[i].data());
    db.push_back(dev[i].t().data);
  }
  const DeviceStatus status;
  const Exec ex = cuda_exec(status);
  const int64_t pad = -1;
  // copy 0→3, 1→4 (pad entry in between), then zero 2 and 5
  const HostTensor src = index_tensor({0, -1, 1}, DType::i64), dst = index_tensor({3, 2, 4});
  const DeviceTensor dsrc(src), ddst(dst);
  slot_ops::copy_cpu(cpu.views(hb, Device::cpu), src, dst, pad);
  slot_ops::copy_cuda(cpu.views(db, Device::cuda), dsrc, ddst, pad, ex);
  const HostTensor zs = index_tensor({2, pad, 5});
  const DeviceTensor dzs(zs);
  slot_ops::zero_cpu(cpu.views(hb, Device::cpu), zs, pad);
  slot_ops::zero_cuda(cpu.views(db, Device::cuda), dzs, pad, ex);
  ASSERT_NO_THROW(check_device_status(ex, "slot_ops"));
  for (size_t i = 0; i < cpu.host.size(); ++i)
    EXPECT_TRUE(dev[i].to_host().bytes_equal(cpu.host[i])) << "tensor " << i;

  // An out-of-range slot is reported and skipped.
  const DeviceTensor bad(index_tensor({cpu.S + 3}));
  slot_ops::zero_cuda(cpu.views(db, Device::cuda), bad, pad, ex);
  try {
    check_device_status(ex, "slot_ops");
    ADD_FAILURE() << "bad slot not reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("STATUS_BAD_SLOT"), std::string::npos) << e.what();
  }
  for (size_t i = 0; i < cpu.host.size(); ++i)
    EXPECT_TRUE(dev[i].to_host().bytes_equal(cpu.host[i])) << "tensor " << i;
}

}  // namespace
}  // namespace replayssm::test

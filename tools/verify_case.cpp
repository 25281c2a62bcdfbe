#include "verify_case.h"

#include <cmath>
#include <random>

#include "common.h"
#include "replayssm/delta.h"
#include "replayssm/dual.h"
#include "replayssm/mamba2.h"

namespace replayssm::tools {
namespace {

const Tensor& pick(const Buf& b, const Exec& e) {
  return e.backend == Backend::cuda ? b.t() : b.host();
}

void fill_uniform(Buf& b, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < b.numel(); ++i) b.set(i, u(rng));
  b.upload();
}

// Mamba-2: y = S C + D x, y ← y·silu(z); δ = softplus(dt + dt_bias), a = exp(δ A).
// A ∈ [−8, −0.5] and dt + dt_bias ∈ [−7, 1] give decays from ~1 down to ~e^−10.
class Mamba2Case final : public FamilyCase {
 public:
  Mamba2Case(const Preset& p, DType act, Device where, uint64_t seed) : p_(p), act_(act) {
    std::mt19937_64 rng(seed);
    A_ = Buf(DType::f32, {p.H}, where);
    dt_bias_ = Buf(DType::f32, {p.H}, where);
    D_ = Buf(DType::f32, {p.H}, where);
    std::uniform_real_distribution<double> u(std::log(0.5), std::log(8.0));
    for (int64_t h = 0; h < p.H; ++h) A_.set(h, -std::exp(u(rng)));
    A_.upload();
    fill_uniform(dt_bias_, rng, -4.0, 0.0);
    fill_uniform(D_, rng, -1.0, 1.0);
  }
  Family family() const override { return Family::mamba2; }
  std::string shape() const override { return shape_str(p_); }
  std::vector<InputSpec> inputs() const override {
    return {{"x", act_, {p_.H, p_.P}, true, 0, 1},
            {"dt", DType::f32, {p_.H}, false, -3, 1},
            {"B", act_, {p_.G, p_.N}, true, 0, 0.3},
            {"C", act_, {p_.G, p_.N}, true, 0, 0.3},
            {"z", act_, {p_.H, p_.P}, true, 0, 1}};
  }
  std::vector<int64_t> out_inner() const override { return {p_.H, p_.P}; }
  std::vector<int64_t> state_inner() const override { return {p_.H, p_.P, p_.N}; }
  std::vector<RingSpec> rings() const override {
    return {{"ring_x", act_, {p_.H, p_.P}}, {"ring_dt", DType::f32, {p_.H}},
            {"ring_B", act_, {p_.G, p_.N}}};
  }
  int64_t ring_length(int64_t L, int64_t T_max) const override { return mamba2_ring_length(L, T_max); }
  std::vector<RingSpec> dual_rings() const override { return {}; }
  int64_t tile_bytes(ReadFormat f) const override {
    return mamba2_tile_bytes(f, Mamba2Shape{p_.H, p_.P, p_.N, p_.G});
  }

  void decode(const StepArgs& a, const Tensor& state, const Exec& e) override {
    mamba2_decode(step(a, e), state, e);
  }
  void prefill(const StepArgs& a, const Tensor& cu, const PoolArgs& p, const Exec& e) override {
    Mamba2Prefill f;
    f.x = a.in[0];
    f.dt = a.in[1];
    f.Bm = a.in[2];
    f.Cm = a.in[3];
    f.z = a.in[4];
    f.A = pick(A_, e);
    f.dt_bias = pick(dt_bias_, e);
    f.D = pick(D_, e);
    f.cu_seqlens = cu;
    f.slot = a.slot;
    f.pad_slot_id = a.pad;
    f.y = a.out;
    mamba2_prefill(f, pool(p, e), e);
  }
  void replay_step(const StepArgs& a, const PoolArgs& p, const Tensor& acc, bool commit_all,
                   const Exec& e) override {
    mamba2_replay_step(step(a, e), pool(p, e), acc, commit_all, e);
  }
  void commit(const PoolArgs& p, const Tensor& slot, int64_t pad, const Tensor& acc,
              const Exec& e) override {
    mamba2_commit(pool(p, e), slot, pad, acc, e);
  }
  void materialize(const PoolArgs& p, const Tensor& slot, int64_t pad, const Tensor& out,
                   const Exec& e) override {
    mamba2_materialize(pool(p, e), slot, pad, out, e);
  }

 private:
  Mamba2Step step(const StepArgs& a, const Exec& e) const {
    Mamba2Step s;
    s.x = a.in[0];
    s.dt = a.in[1];
    s.Bm = a.in[2];
    s.Cm = a.in[3];
    s.z = a.in[4];
    s.A = pick(A_, e);
    s.dt_bias = pick(dt_bias_, e);
    s.D = pick(D_, e);
    s.slot = a.slot;
    s.pad_slot_id = a.pad;
    s.y = a.out;
    return s;
  }
  // A rides with a replay pool (folding records needs exp(δ·A)).
  Mamba2Pool pool(const PoolArgs& p, const Exec& e) const {
    Mamba2Pool m;
    if (p.t[1].defined()) m.A = pick(A_, e);
    m.state = p.t[0];
    m.ring_x = p.t[1];
    m.ring_dt = p.t[2];
    m.ring_B = p.t[3];
    m.cursor = p.t[4];
    m.L = p.L;
    m.read_copy = p.read_copy;
    m.read_format = p.read_format;
    return m;
  }
  Preset p_;
  DType act_;
  Buf A_, dt_bias_, D_;
};

// GDN / KDA with raw gates: g = −exp(A_log)·softplus(a + dt_bias), β = sigmoid(b),
// q, k L2-normalised in the kernel. exp(A_log) ∈ [0.1, 4] and a + dt_bias
// around [−5, 3] give log-decays from ~−0.001 to ~−13.
class DeltaCase final : public FamilyCase {
 public:
  DeltaCase(const Preset& p, DType act, Device where, uint64_t seed)
      : p_(p), act_(act), f_(p.family == Family::kda ? DeltaFamily::kda : DeltaFamily::gdn) {
    std::mt19937_64 rng(seed);
    A_log_ = Buf(DType::f32, {p.HV}, where);
    fill_uniform(A_log_, rng, std::log(0.1), std::log(4.0));
    dt_bias_ = kda() ? Buf(DType::f32, {p.HV, p.K}, where) : Buf(DType::f32, {p.HV}, where);
    fill_uniform(dt_bias_, rng, -3.0, 1.0);
  }
  Family family() const override { return p_.family; }
  std::string shape() const override { return shape_str(p_); }
  std::vector<InputSpec> inputs() const override {
    std::vector<int64_t> g_inner = kda() ? std::vector<int64_t>{p_.HV, p_.K} : std::vector<int64_t>{p_.HV};
    return {{"q", act_, {p_.H, p_.K}, true, 0, 1},
            {"k", act_, {p_.H, p_.K}, true, 0, 1},
            {"v", act_, {p_.HV, p_.V}, true, 0, 1},
            {"g", DType::f32, g_inner, true, 0, 1},
            {"beta", DType::f32, {p_.HV}, true, 0, 1.5}};
  }
  std::vector<int64_t> out_inner() const override { return {p_.HV, p_.V}; }
  std::vector<int64_t> state_inner() const override { return {p_.HV, p_.V, p_.K}; }
  std::vector<RingSpec> rings() const override {
    std::vector<int64_t> g_inner = kda() ? std::vector<int64_t>{p_.HV, p_.K} : std::vector<int64_t>{p_.HV};
    return {{"ring_d", DType::f32, {p_.HV, p_.V}},
            {"ring_k", act_, {p_.H, p_.K}},
            {"ring_ks", DType::f32, {p_.H}},
            {"ring_g", DType::f32, g_inner}};
  }
  int64_t ring_length(int64_t L, int64_t T_max) const override { return delta_ring_length(L, T_max); }
  std::vector<RingSpec> dual_rings() const override {
    return {{"ring_v", act_, {p_.HV, p_.V}}, {"ring_beta", DType::f32, {p_.HV}}};
  }
  int64_t tile_bytes(ReadFormat f) const override {
    return delta_tile_bytes(f, DeltaShape{p_.H, p_.HV, p_.K, p_.V});
  }

  void decode(const StepArgs& a, const Tensor& state, const Exec& e) override {
    delta_decode(f_, step(a, e), state, e);
  }
  void prefill(const StepArgs& a, const Tensor& cu, const PoolArgs& p, const Exec& e) override {
    DeltaPrefill f;
    f.q = a.in[0];
    f.k = a.in[1];
    f.v = a.in[2];
    f.g = a.in[3];
    f.beta = a.in[4];
    f.A_log = pick(A_log_, e);
    f.dt_bias = pick(dt_bias_, e);
    f.cu_seqlens = cu;
    f.slot = a.slot;
    f.pad_slot_id = a.pad;
    f.o = a.out;
    delta_prefill(f_, f, pool(p), e);
  }
  void replay_step(const StepArgs& a, const PoolArgs& p, const Tensor& acc, bool commit_all,
                   const Exec& e) override {
    delta_replay_step(f_, step(a, e), pool(p), acc, commit_all, e);
  }
  void commit(const PoolArgs& p, const Tensor& slot, int64_t pad, const Tensor& acc,
              const Exec& e) override {
    delta_commit(f_, pool(p), slot, pad, acc, e);
  }
  void materialize(const PoolArgs& p, const Tensor& slot, int64_t pad, const Tensor& out,
                   const Exec& e) override {
    delta_materialize(f_, pool(p), slot, pad, out, e);
  }

 private:
  bool kda() const { return p_.family == Family::kda; }
  DeltaStep step(const StepArgs& a, const Exec& e) const {
    DeltaStep s;
    s.q = a.in[0];
    s.k = a.in[1];
    s.v = a.in[2];
    s.g = a.in[3];
    s.beta = a.in[4];
    s.A_log = pick(A_log_, e);
    s.dt_bias = pick(dt_bias_, e);
    s.slot = a.slot;
    s.pad_slot_id = a.pad;
    s.o = a.out;
    return s;
  }
  static DeltaPool pool(const PoolArgs& p) {
    DeltaPool d;
    d.state = p.t[0];
    d.ring_d = p.t[1];
    d.ring_k = p.t[2];
    d.ring_ks = p.t[3];
    d.ring_g = p.t[4];
    d.cursor = p.t[5];
    d.L = p.L;
    d.read_copy = p.read_copy;
    d.read_format = p.read_format;
    if (p.dual.size() == 2) {
      d.ring_v = p.dual[0];
      d.ring_beta = p.dual[1];
    }
    return d;
  }
  Preset p_;
  DType act_;
  DeltaFamily f_;
  Buf A_log_, dt_bias_;
};

}  // namespace

std::vector<bool> mirror_replay_step(std::vector<RingCursor>& cursors, const std::vector<int64_t>& slots,
                                     int64_t pad, const std::vector<int64_t>& prev_acc, int64_t T, int64_t L,
                                     int64_t R, bool commit_all, int64_t* flushes) {
  std::vector<bool> flush(slots.size(), false);
  for (size_t b = 0; b < slots.size(); ++b) {
    if (slots[b] == pad) continue;
    RingCursor& c = cursors[b];
    if (c.pending > 0) ring_commit(c, int32_t(prev_acc[b]));
    const StepPlan p = ring_plan_step(c, int32_t(T), int32_t(L), int32_t(R));
    flush[b] = p.flush;
    *flushes += p.flush;
    c = p.next;
    if (commit_all) {
      c.count += c.pending;
      c.pending = 0;
    }
  }
  return flush;
}

std::unique_ptr<FamilyCase> make_case(const Preset& p, DType act, Device where, uint64_t seed) {
  if (p.family == Family::mamba2) return std::make_unique<Mamba2Case>(p, act, where, seed);
  return std::make_unique<DeltaCase>(p, act, where, seed);
}

}  // namespace replayssm::tools

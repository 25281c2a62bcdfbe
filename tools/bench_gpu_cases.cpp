// GPU benchmark cases: pools, realistic random inputs, byte model.
#if defined(REPLAYSSM_WITH_CUDA)
#include "bench_gpu_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>

#include "core/dtype.h"
#include "core/eager.h"
#include "delta/heuristics.h"
#include "mamba2/heuristics.h"
#include "presets.h"
#include "replayssm/delta.h"
#include "replayssm/dual.h"
#include "replayssm/mamba2.h"

namespace replayssm::bench {

void cuda_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                             cudaGetErrorString(err) + ")");
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  cuda_ok(cudaMalloc(&ptr_, bytes ? bytes : 1), "cudaMalloc");
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

void fill_random(void* dev, DType dt, int64_t n, Dist dist, double a, double b, uint64_t seed) {
  if (n <= 0) return;
  const size_t es = dtype_size(dt);
  const int64_t tile = std::min<int64_t>(n, int64_t(1) << 18);
  std::vector<uint8_t> host(size_t(tile) * es);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(a, b);
  std::normal_distribution<double> nd(a, b);
  for (int64_t i = 0; i < tile; ++i) store_from_f64(host.data(), dt, i, dist == Dist::uniform ? u(rng) : nd(rng));
  auto* p = static_cast<uint8_t*>(dev);
  cuda_ok(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice), "fill_random H2D");
  for (int64_t done = tile; done < n;) {  // doubling device copies
    const int64_t c = std::min(done, n - done);
    cuda_ok(cudaMemcpy(p + size_t(done) * es, p, size_t(c) * es, cudaMemcpyDeviceToDevice),
            "fill_random D2D");
    done += c;
  }
}

const char* dtype_label(DType dt) {
  switch (dt) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    default: return dtype_name(dt);
  }
}
bool parse_dtype_label(const std::string& s, DType* out) {
  if (s == "fp32" || s == "f32") *out = DType::f32;
  else if (s == "fp16" || s == "f16") *out = DType::f16;
  else if (s == "bf16") *out = DType::bf16;
  else return false;
  return true;
}

const char* format_label(ReadFormat f) {
  return f == ReadFormat::f16 ? "fp16" : read_format_name(f);
}
bool parse_format_label(const std::string& s, ReadFormat* out) {
  if (s == "bf16") *out = ReadFormat::bf16;
  else if (s == "fp16" || s == "f16") *out = ReadFormat::f16;
  else if (s == "fp8" || s == "fp8_e4m3" || s == "e4m3") *out = ReadFormat::fp8_e4m3;
  else if (s == "nvfp4") *out = ReadFormat::nvfp4;
  else return false;
  return true;
}

std::string ModelShape::name() const {
  auto s = [](const char* k, int64_t v) { return std::string(k) + std::to_string(v); };
  if (family == "mamba2") return s("H", H) + "-" + s("P", P) + "-" + s("N", N) + "-" + s("G", G);
  return s("H", H) + "-" + s("HV", HV) + "-" + s("K", K) + "-" + s("V", V);
}

static ModelShape from_preset(const tools::Preset& p) {
  return {p.name, tools::family_name(p.family), p.H, p.P, p.N, p.G, p.HV, p.K, p.V};
}

std::vector<ModelShape> default_shapes() {
  std::vector<ModelShape> v;
  for (const tools::Preset& p : tools::PRESETS) v.push_back(from_preset(p));
  return v;
}
std::vector<ModelShape> quick_shapes() {
  std::vector<ModelShape> v;
  for (const tools::Preset& p : tools::PRESETS) {
    const bool target = (p.family == tools::Family::mamba2 && p.H == 128 && p.P == 64) ||
                        (p.family == tools::Family::gdn && p.HV == 64) || p.family == tools::Family::kda;
    if (target) v.push_back(from_preset(p));
  }
  return v;
}
bool shape_matches(const ModelShape& s, const std::string& sel) {
  for (const tools::Preset& p : tools::select_presets(sel))
    if (s.preset == p.name) return true;
  return (s.family + "/" + s.name()).find(sel) != std::string::npos;
}

double baseline_bytes_per_step(const ByteModel& m, int64_t B) {
  return double(B) * (2 * m.state + m.inputs + m.outputs) + m.params;
}
// State read every step, written at flushes; one record appended; history and
// folded records read; inputs, outputs, cursor.
double replay_bytes_per_step(const ByteModel& m, const FlushStats& f, int64_t B) {
  const double row = m.state * (1 + f.flush_share) + m.record * (1 + f.hist_mean + f.fold_mean) +
                     m.inputs + m.outputs + m.cursor;
  return double(B) * row + m.params;
}

double snapshot_bytes_per_step(const ByteModel& m, int64_t B, int64_t T) {
  const double t = double(T);
  return double(B) * (m.state * (1 + t) + t * (m.inputs + m.outputs) + 4) + m.params;
}
double spec_replay_bytes_per_step(const ByteModel& m, const FlushStats& f, int64_t B, int64_t T) {
  const double t = double(T);
  const double row = m.state * (1 + f.flush_share) + m.record * (t + f.hist_mean + f.fold_mean) +
                     t * (m.inputs + m.outputs) + m.cursor + 4;
  return double(B) * row + m.params;
}

double dual_bytes_per_step(const ByteModel& m, const FlushStats& f, int64_t B, int64_t T) {
  const double t = double(T);
  const double row = m.copy * (1 - f.flush_share) + f.flush_share * (2 * m.state + m.copy) +
                     m.record * (t + f.hist_mean + f.fold_mean) + m.dual_extra * (t + f.fold_mean) +
                     t * (m.inputs + m.outputs) + m.cursor + (T > 1 ? 4 : 0);
  return double(B) * row + m.params;
}
double shared_bytes_per_step(const ByteModel& m, int64_t B, int64_t T) {
  return double(B) * (2 * m.copy + double(T) * (m.inputs + m.outputs)) + m.params;
}

// Packs `tiles` state tiles [tiles, R, K] (dtype dt) into `copy` on the
// device (quant_pack, cuda backend, default stream) and waits for it.
static void pack_copy(ReadFormat f, const void* state, DType dt, int64_t tiles, int64_t R, int64_t K,
                      void* copy, int64_t tile_bytes) {
  Exec e;
  e.backend = Backend::cuda;
  quant_pack(f, Tensor::view(const_cast<void*>(state), dt, {tiles, R, K}, Device::cuda),
             Tensor::view(copy, DType::u8, {tiles, tile_bytes}, Device::cuda), e);
  cuda_ok(cudaDeviceSynchronize(), "read copy pack");
}

// ---------------------------------------------------------------------------
// Case: slot sets, cursors, flush simulation, output check.

void Case::init_common(int64_t B_, int64_t nsets_, int64_t L_max_, uint64_t seed) {
  B = B_;
  nsets = nsets_;
  S = B * nsets;
  L_max = L_max_;
  L = L_max_;
  host_slots_.resize(size_t(S));
  std::iota(host_slots_.begin(), host_slots_.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(host_slots_.begin(), host_slots_.end(), rng);
  slots_ = DeviceBuffer(size_t(S) * 4);
  cuda_ok(cudaMemcpy(slots_.get(), host_slots_.data(), size_t(S) * 4, cudaMemcpyHostToDevice), "slots");
  cursor_ = DeviceBuffer(size_t(S) * 3 * 4);
  host_cursor_.assign(size_t(S), RingCursor{0, 0, 0});
  cuda_ok(cudaMemset(cursor_.get(), 0, cursor_.bytes()), "cursor");
}

Tensor Case::slot_view(int64_t set) const {
  return Tensor::view(static_cast<int32_t*>(slots_.get()) + set * B, DType::i32, {B}, Device::cuda);
}
Tensor Case::cursor_view() const {
  return Tensor::view(cursor_.get(), DType::i32, {S, CURSOR_FIELDS}, Device::cuda);
}

void Case::prepare_replay(int64_t L_, bool aligned, uint64_t seed) {
  if (L_ < 1 || L_ > L_max) throw std::runtime_error("prepare_replay: L out of range");
  L = L_;
  std::mt19937_64 rng(seed);
  for (auto& c : host_cursor_) {
    c.start = int32_t(rng() % uint64_t(R()));
    c.count = aligned ? int32_t(L) : int32_t(1 + rng() % uint64_t(L));
    c.pending = 0;
  }
  static_assert(sizeof(RingCursor) == CURSOR_FIELDS * 4);
  cuda_ok(cudaMemcpy(cursor_.get(), host_cursor_.data(), size_t(S) * sizeof(RingCursor),
                     cudaMemcpyHostToDevice), "cursor upload");
}

FlushStats Case::simulate(int64_t steps) const {
  std::vector<RingCursor> c = host_cursor_;
  double flushes = 0, hist = 0, fold = 0, peak = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const int32_t* set = host_slots_.data() + (i % nsets) * B;
    int64_t step_flushes = 0;
    for (int64_t b = 0; b < B; ++b) {
      RingCursor& cur = c[size_t(set[b])];
      const StepPlan p = ring_plan_step(cur, 1, int32_t(L), int32_t(R()));
      step_flushes += p.flush;
      hist += p.hist_count;
      fold += p.fold_count;
      cur = p.next;
      ring_commit(cur, 1);
    }
    flushes += double(step_flushes);
    peak = std::max(peak, double(step_flushes) / double(B));
  }
  const double rs = double(steps) * double(B);
  return {flushes / rs, peak, hist / rs, fold / rs};
}

Tensor Case::accepted_view(int64_t i) const {
  return Tensor::view(static_cast<int32_t*>(acc_.get()) + (i % acc_steps_) * B, DType::i32, {B}, Device::cuda);
}

static void* make_index(std::vector<DeviceBuffer>& store, int64_t n);

bool Case::reset_snapshot(int64_t nsets_snap) {
  snap_sets_ = nsets_snap;
  snap_buf_.clear();
  if (nsets_snap == 0) return false;
  snap_idx_ = make_index(snap_buf_, nsets_snap * B * T);
  return true;
}

Tensor Case::snapshot_indices(int64_t i) const {
  const int64_t set = i % snap_sets_;
  return Tensor::view(static_cast<int32_t*>(snap_idx_) + set * B * T, DType::i32, {B, T}, Device::cuda);
}

double Case::prepare_acceptance(int64_t steps, double rate, uint64_t seed) {
  acc_steps_ = steps;
  host_acc_.resize(size_t(steps * B));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  double sum = 0;
  for (auto& a : host_acc_) {
    a = 1;
    while (a < T && u(rng) < rate) ++a;
    sum += a;
  }
  acc_ = DeviceBuffer(host_acc_.size() * 4);
  cuda_ok(cudaMemcpy(acc_.get(), host_acc_.data(), host_acc_.size() * 4, cudaMemcpyHostToDevice), "acceptances");
  return sum / double(host_acc_.size());
}

void Case::prepare_spec(int64_t L_, uint64_t seed) {
  if (L_ < T || L_ > L_max) throw std::runtime_error("prepare_spec: L out of range [T, L_max]");
  L = L_;
  std::mt19937_64 rng(seed);
  for (auto& c : host_cursor_) {
    c.start = int32_t(rng() % uint64_t(R()));
    c.count = int32_t(rng() % uint64_t(L - T + 1));  // the step that appended them fitted: count + T <= L
    c.pending = int32_t(T);
  }
  cuda_ok(cudaMemcpy(cursor_.get(), host_cursor_.data(), size_t(S) * sizeof(RingCursor),
                     cudaMemcpyHostToDevice), "cursor upload");
}

FlushStats Case::simulate_spec(int64_t steps, int passes) const {
  std::vector<RingCursor> c = host_cursor_;
  double flushes = 0, hist = 0, fold = 0, peak = 0, rs = 0;
  for (int pass = 0; pass < passes; ++pass) {
    for (int64_t i = 0; i < steps; ++i) {
      const int32_t* set = host_slots_.data() + (i % nsets) * B;
      const int32_t* acc = host_acc_.data() + (i % acc_steps_) * B;
      int64_t step_flushes = 0;
      for (int64_t b = 0; b < B; ++b) {
        RingCursor& cur = c[size_t(set[b])];
        ring_commit(cur, acc[b]);
        const StepPlan p = ring_plan_step(cur, int32_t(T), int32_t(L), int32_t(R()));
        cur = p.next;
        if (pass == 0) continue;
        step_flushes += p.flush;
        hist += p.hist_count;
        fold += p.fold_count;
      }
      if (pass == 0) continue;
      flushes += double(step_flushes);
      peak = std::max(peak, double(step_flushes) / double(B));
      rs += double(B);
    }
  }
  rs = std::max(rs, 1.0);
  return {flushes / rs, peak, hist / rs, fold / rs};
}

bool Case::outputs_finite(int64_t* nonzero) const {
  cuda_ok(cudaDeviceSynchronize(), "sync before output check");
  const int64_t n = out_.numel();
  std::vector<uint8_t> h(size_t(n) * dtype_size(out_.dtype));
  cuda_ok(cudaMemcpy(h.data(), out_.data, h.size(), cudaMemcpyDeviceToHost), "output D2H");
  bool finite = true;
  int64_t nz = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = load_as_f64(h.data(), out_.dtype, i);
    finite = finite && std::isfinite(v);
    nz += v != 0;
  }
  if (nonzero) *nonzero = nz;
  return finite;
}

// Device tensor of the given shape, filled; keeps its buffer in `store`.
static Tensor make_filled(std::vector<DeviceBuffer>& store, DType dt, std::initializer_list<int64_t> shape,
                          Dist dist, double a, double b, uint64_t seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  store.emplace_back(size_t(n) * dtype_size(dt));
  fill_random(store.back().get(), dt, n, dist, a, b, seed);
  return Tensor::view(store.back().get(), dt, shape, Device::cuda);
}

// Device i32 [n] holding 0, 1, ..., n − 1; keeps its buffer in `store`.
static void* make_index(std::vector<DeviceBuffer>& store, int64_t n) {
  std::vector<int32_t> h(static_cast<size_t>(n));
  std::iota(h.begin(), h.end(), 0);
  store.emplace_back(size_t(n) * 4);
  cuda_ok(cudaMemcpy(store.back().get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice), "index upload");
  return store.back().get();
}

// ---------------------------------------------------------------------------
// Mamba-2. Gates: A = −exp(A_log), A_log ∈ [0, ln 16]; δ = softplus(dt + dt_bias)
// spans ≈ 1e-3 .. 1, so decays exp(δA) range from ≈ 1 to ≈ e^-16.

class Mamba2Case final : public Case {
 public:
  Mamba2Case(const ModelShape& s, int64_t B_, int64_t nsets_, DType state, DType act_, int64_t L_max_,
             uint64_t seed, int64_t T_)
      : s_(s) {
    state_dtype = state;
    act = act_;
    T = T_;
    init_common(B_, nsets_, L_max_, seed);
    const int64_t H = s.H, P = s.P, N = s.N, G = s.G, Rm = L_max + T;
    pool_.state = make_filled(buf_, state, {S, H, P, N}, Dist::normal, 0, 0.1, seed + 1);
    ring_x_ = make_filled(buf_, act, {S, Rm, H, P}, Dist::normal, 0, 1, seed + 2).data;
    ring_dt_ = make_filled(buf_, DType::f32, {S, Rm, H}, Dist::uniform, 1e-3, 0.3, seed + 3).data;
    ring_B_ = make_filled(buf_, act, {S, Rm, G, N}, Dist::normal, 0, 1, seed + 4).data;
    step_.x = make_filled(buf_, act, {B, T, H, P}, Dist::normal, 0, 1, seed + 5);
    step_.dt = make_filled(buf_, act, {B, T, H}, Dist::uniform, -4, 1.5, seed + 6);
    step_.Bm = make_filled(buf_, act, {B, T, G, N}, Dist::normal, 0, 1, seed + 7);
    step_.Cm = make_filled(buf_, act, {B, T, G, N}, Dist::normal, 0, 1, seed + 8);
    step_.A = make_filled(buf_, DType::f32, {H}, Dist::uniform, -16, -1, seed + 9);
    step_.dt_bias = make_filled(buf_, DType::f32, {H}, Dist::uniform, -3, -1, seed + 10);
    step_.D = make_filled(buf_, DType::f32, {H}, Dist::normal, 0, 1, seed + 11);
    step_.dt_softplus = true;
    step_.y = make_filled(buf_, act, {B, T, H, P}, Dist::uniform, 0, 0, seed + 12);
    out_ = step_.y;
    pool_.cursor = cursor_view();
    pool_.A = step_.A;
  }

  void step(bool replay, int64_t set, const Exec& exec) override {
    step_.slot = slot_view(set);
    if (!replay) {
      mamba2_decode(step_, pool_.state, exec);
      return;
    }
    bind_rings();
    mamba2_replay_step(step_, pool_, Tensor{}, true, exec);
  }

  void prepare_snapshot(int64_t nsets_snap) override {
    if (!reset_snapshot(nsets_snap)) return;
    snap_state_ = make_filled(snap_buf_, state_dtype, {nsets_snap * B * T, s_.H, s_.P, s_.N}, Dist::normal, 0, 0.1, 77);
  }
  void step_spec(bool replay, int64_t set, int64_t i, const Exec& exec) override {
    if (!replay) {
      mamba2_snapshot_decode(step_, snap_state_, snapshot_indices(i), accepted_view(i), exec);
      return;
    }
    step_.slot = slot_view(set);
    bind_rings();
    mamba2_replay_step(step_, pool_, accepted_view(i), false, exec);
  }
  int64_t snapshot_mem_bytes_per_row() const override {
    return mamba2_snapshot_bytes_per_row({s_.H, s_.P, s_.N, s_.G}, state_dtype, T);
  }

  ByteModel bytes() const override {
    const double sa = double(dtype_size(act)), H = double(s_.H), P = double(s_.P), GN = double(s_.G * s_.N);
    ByteModel m;
    m.state = H * P * double(s_.N) * double(dtype_size(state_dtype));
    m.record = H * P * sa + H * 4 + GN * sa;             // x, δ (fp32), B
    m.inputs = H * P * sa + H * sa + 2 * GN * sa + 4;    // x, dt, B, C, slot
    m.outputs = H * P * sa;                              // y
    m.params = 3 * H * 4;                                // A, dt_bias, D
    m.cursor = 2 * CURSOR_FIELDS * 4;
    m.copy = has_copy ? H * double(tile_bytes_) : 0;
    return m;
  }
  bool eager_step() const override {
    return mamba2::eager_by_rule(B, s_.H * s_.P * s_.N, int64_t(dtype_size(state_dtype)));
  }
  int64_t replay_mem_bytes_per_row() const override {
    return mamba2_replay_bytes_per_row({s_.H, s_.P, s_.N, s_.G}, state_dtype, act, L, T);
  }
  std::string record_desc() const override {
    return std::string("x:") + dtype_label(act) + " dt:fp32 B:" + dtype_label(act);
  }
  DType record_dtype() const override { return act; }

  void set_read_copy(ReadFormat f) override {
    clear_read_copy();
    tile_bytes_ = mamba2_tile_bytes(f, shape());
    copy_ = DeviceBuffer(size_t(S * s_.H * tile_bytes_));
    pack_copy(f, pool_.state.data, state_dtype, S * s_.H, s_.P, s_.N, copy_.get(), tile_bytes_);
    pool_.read_copy = Tensor::view(copy_.get(), DType::u8, {S, s_.H, tile_bytes_}, Device::cuda);
    pool_.read_format = f;
    read_format = f;
    has_copy = true;
  }
  void clear_read_copy() override {
    pool_.read_copy = Tensor{};
    copy_ = DeviceBuffer();
    has_copy = false;
  }
  void step_shared(int64_t set, const Exec& exec) override {
    step_.slot = slot_view(set);
    mamba2_decode_shared(step_, pool_.read_copy, read_format, QuantRounding{}, exec);
  }
  int64_t dual_mem_bytes_per_row() const override {
    return mamba2_state_bytes_per_row(PrecisionMode::dual, shape(), state_dtype, read_format, act, L, T);
  }
  int64_t shared_mem_bytes_per_row() const override {
    return mamba2_state_bytes_per_row(PrecisionMode::shared, shape(), state_dtype, read_format, act, L, T);
  }
  int64_t copy_bytes_per_row(ReadFormat f) const override { return s_.H * mamba2_tile_bytes(f, shape()); }

 private:
  Mamba2Shape shape() const { return {s_.H, s_.P, s_.N, s_.G}; }
  // Ring views of R() = L + T entries per slot for the current L.
  void bind_rings() {
    pool_.ring_x = Tensor::view(ring_x_, act, {S, R(), s_.H, s_.P}, Device::cuda);
    pool_.ring_dt = Tensor::view(ring_dt_, DType::f32, {S, R(), s_.H}, Device::cuda);
    pool_.ring_B = Tensor::view(ring_B_, act, {S, R(), s_.G, s_.N}, Device::cuda);
    pool_.L = L;
  }
  ModelShape s_;
  std::vector<DeviceBuffer> buf_;
  void *ring_x_ = nullptr, *ring_dt_ = nullptr, *ring_B_ = nullptr;
  Mamba2Step step_;
  Mamba2Pool pool_;
  Tensor snap_state_;
};

// ---------------------------------------------------------------------------
// GDN / KDA with raw gating: g = −exp(A_log)·softplus(a + dt_bias), A_log ∈
// [0, ln 16], a + dt_bias ∈ [−6, 3]: decays from ≈ 0.99 to ≈ e^-48. β = sigmoid(b).

class DeltaCase final : public Case {
 public:
  DeltaCase(const ModelShape& s, int64_t B_, int64_t nsets_, DType state, DType act_, DType d_dtype,
            int64_t L_max_, uint64_t seed, int64_t T_)
      : s_(s), f_(s.family == "kda" ? DeltaFamily::kda : DeltaFamily::gdn), d_dtype_(d_dtype) {
    state_dtype = state;
    act = act_;
    T = T_;
    init_common(B_, nsets_, L_max_, seed);
    const int64_t H = s.H, HV = s.HV, K = s.K, V = s.V, Rm = L_max + T;
    const bool kda = f_ == DeltaFamily::kda;
    const int64_t GK = kda ? K : 1;  // gate channels per value head
    state_ = make_filled(buf_, state, {S, HV, V, K}, Dist::normal, 0, 0.05, seed + 1);
    ring_d_ = make_filled(buf_, d_dtype, {S, Rm, HV, V}, Dist::normal, 0, 0.3, seed + 2).data;
    ring_k_ = make_filled(buf_, act, {S, Rm, H, K}, Dist::normal, 0, 1, seed + 3).data;
    ring_ks_ = make_filled(buf_, DType::f32, {S, Rm, H}, Dist::uniform, 0.07, 0.11, seed + 4).data;
    ring_g_ = make_filled(buf_, DType::f32, {S, Rm, HV * GK}, Dist::uniform, -1.5, -1e-3, seed + 5).data;
    step_.q = make_filled(buf_, act, {B, T, H, K}, Dist::normal, 0, 1, seed + 6);
    step_.k = make_filled(buf_, act, {B, T, H, K}, Dist::normal, 0, 1, seed + 7);
    step_.v = make_filled(buf_, act, {B, T, HV, V}, Dist::normal, 0, 1, seed + 8);
    step_.g = kda ? make_filled(buf_, act, {B, T, HV, K}, Dist::uniform, -4, 2, seed + 9)
                  : make_filled(buf_, act, {B, T, HV}, Dist::uniform, -4, 2, seed + 9);
    step_.beta = make_filled(buf_, act, {B, T, HV}, Dist::normal, 0, 2, seed + 10);
    step_.A_log = make_filled(buf_, DType::f32, {HV}, Dist::uniform, 0, std::log(16.0), seed + 11);
    step_.dt_bias = kda ? make_filled(buf_, DType::f32, {HV, K}, Dist::uniform, -2, 1, seed + 12)
                        : make_filled(buf_, DType::f32, {HV}, Dist::uniform, -2, 1, seed + 12);
    step_.gating = DeltaGating{};  // raw gate, raw beta, L2-normalised q/k, q_scale K^-1/2
    step_.o = make_filled(buf_, act, {B, T, HV, V}, Dist::uniform, 0, 0, seed + 13);
    out_ = step_.o;
    pool_.state = state_;
    pool_.cursor = cursor_view();
  }

  void step(bool replay, int64_t set, const Exec& exec) override {
    step_.slot = slot_view(set);
    if (!replay) {
      delta_decode(f_, step_, state_, exec);
      return;
    }
    bind_rings();
    delta_replay_step(f_, step_, pool_, Tensor{}, true, exec);
  }

  void prepare_snapshot(int64_t nsets_snap) override {
    if (!reset_snapshot(nsets_snap)) return;
    snap_state_ = make_filled(snap_buf_, state_dtype, {nsets_snap * B * T, s_.HV, s_.V, s_.K}, Dist::normal, 0, 0.05, 77);
  }
  void step_spec(bool replay, int64_t set, int64_t i, const Exec& exec) override {
    if (!replay) {
      delta_snapshot_decode(f_, step_, snap_state_, snapshot_indices(i), accepted_view(i), exec);
      return;
    }
    step_.slot = slot_view(set);
    bind_rings();
    delta_replay_step(f_, step_, pool_, accepted_view(i), false, exec);
  }
  int64_t snapshot_mem_bytes_per_row() const override {
    return delta_snapshot_bytes_per_row({s_.H, s_.HV, s_.K, s_.V}, state_dtype, T);
  }

  ByteModel bytes() const override {
    const double sa = double(dtype_size(act)), H = double(s_.H), HV = double(s_.HV), K = double(s_.K),
                 V = double(s_.V);
    const double GK = f_ == DeltaFamily::kda ? K : 1;
    ByteModel m;
    m.state = HV * V * K * double(dtype_size(state_dtype));
    m.record = HV * V * double(dtype_size(d_dtype_)) + H * K * sa + H * 4 + HV * GK * 4;  // d, k, ks, g
    m.inputs = 2 * H * K * sa + HV * V * sa + HV * GK * sa + HV * sa + 4;  // q, k, v, a, b, slot
    m.outputs = HV * V * sa;                                               // o
    m.params = HV * 4 + HV * GK * 4;                                       // A_log, dt_bias
    m.cursor = 2 * CURSOR_FIELDS * 4;
    m.copy = has_copy ? HV * double(tile_bytes_) : 0;
    m.dual_extra = HV * V * sa + HV * 4;  // v (as it arrived), β (fp32)
    return m;
  }
  bool eager_step() const override {
    return replayssm::eager_step(B, s_.HV * s_.V * s_.K * int64_t(dtype_size(state_dtype)),
                                 delta::cuda_impl::EAGER_MAX_ROWS, delta::cuda_impl::EAGER_MAX_BYTES);
  }
  int64_t replay_mem_bytes_per_row() const override {
    return delta_replay_bytes_per_row(f_, {s_.H, s_.HV, s_.K, s_.V}, state_dtype, act, d_dtype_, L, T);
  }
  std::string record_desc() const override {
    return std::string("d:") + dtype_label(d_dtype_) + " k:" + dtype_label(act) + " ks:fp32 g:fp32";
  }
  DType record_dtype() const override { return d_dtype_; }

  void set_read_copy(ReadFormat f) override {
    clear_read_copy();
    const int64_t HV = s_.HV, Rm = L_max + T;
    tile_bytes_ = delta_tile_bytes(f, shape());
    copy_ = DeviceBuffer(size_t(S * HV * tile_bytes_));
    pack_copy(f, state_.data, state_dtype, S * HV, s_.V, s_.K, copy_.get(), tile_bytes_);
    ring_v_ = make_filled(dual_buf_, act, {S, Rm, HV, s_.V}, Dist::normal, 0, 1, 91).data;
    ring_beta_ = make_filled(dual_buf_, DType::f32, {S, Rm, HV}, Dist::uniform, 0.1, 0.9, 92).data;
    pool_.read_copy = Tensor::view(copy_.get(), DType::u8, {S, HV, tile_bytes_}, Device::cuda);
    pool_.read_format = f;
    read_format = f;
    has_copy = true;
  }
  void clear_read_copy() override {
    pool_.read_copy = pool_.ring_v = pool_.ring_beta = Tensor{};
    copy_ = DeviceBuffer();
    dual_buf_.clear();
    ring_v_ = ring_beta_ = nullptr;
    has_copy = false;
  }
  void step_shared(int64_t set, const Exec& exec) override {
    step_.slot = slot_view(set);
    delta_decode_shared(f_, step_, pool_.read_copy, read_format, QuantRounding{}, exec);
  }
  int64_t dual_mem_bytes_per_row() const override {
    return delta_state_bytes_per_row(PrecisionMode::dual, f_, shape(), state_dtype, read_format, act, d_dtype_, L, T);
  }
  int64_t shared_mem_bytes_per_row() const override {
    return delta_state_bytes_per_row(PrecisionMode::shared, f_, shape(), state_dtype, read_format, act, d_dtype_, L, T);
  }
  int64_t copy_bytes_per_row(ReadFormat f) const override { return s_.HV * delta_tile_bytes(f, shape()); }

 private:
  DeltaShape shape() const { return {s_.H, s_.HV, s_.K, s_.V}; }
  // Ring views of R() = L + T entries per slot for the current L (and the
  // dual records v, β while a read copy is bound).
  void bind_rings() {
    const int64_t H = s_.H, HV = s_.HV, K = s_.K, V = s_.V;
    if (has_copy) {
      pool_.ring_v = Tensor::view(ring_v_, act, {S, R(), HV, V}, Device::cuda);
      pool_.ring_beta = Tensor::view(ring_beta_, DType::f32, {S, R(), HV}, Device::cuda);
    }
    pool_.ring_d = Tensor::view(ring_d_, d_dtype_, {S, R(), HV, V}, Device::cuda);
    pool_.ring_k = Tensor::view(ring_k_, act, {S, R(), H, K}, Device::cuda);
    pool_.ring_ks = Tensor::view(ring_ks_, DType::f32, {S, R(), H}, Device::cuda);
    pool_.ring_g = f_ == DeltaFamily::kda ? Tensor::view(ring_g_, DType::f32, {S, R(), HV, K}, Device::cuda)
                                          : Tensor::view(ring_g_, DType::f32, {S, R(), HV}, Device::cuda);
    pool_.L = L;
  }
  ModelShape s_;
  DeltaFamily f_;
  DType d_dtype_;
  std::vector<DeviceBuffer> buf_;
  Tensor state_;
  void *ring_d_ = nullptr, *ring_k_ = nullptr, *ring_ks_ = nullptr, *ring_g_ = nullptr;
  std::vector<DeviceBuffer> dual_buf_;  // ring_v, ring_beta while a read copy is bound
  void *ring_v_ = nullptr, *ring_beta_ = nullptr;
  DeltaStep step_;
  DeltaPool pool_;
  Tensor snap_state_;
};

std::unique_ptr<Case> make_case(const ModelShape& shape, int64_t B, int64_t nsets, DType state,
                                DType act, DType d_dtype, int64_t L_max, uint64_t seed, int64_t T) {
  if (shape.family == "mamba2") return std::make_unique<Mamba2Case>(shape, B, nsets, state, act, L_max, seed, T);
  return std::make_unique<DeltaCase>(shape, B, nsets, state, act, d_dtype, L_max, seed, T);
}

}  // namespace replayssm::bench
#endif  // REPLAYSSM_WITH_CUDA

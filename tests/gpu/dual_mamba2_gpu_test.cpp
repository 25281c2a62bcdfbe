// Dual-precision Mamba-2 pools on the CUDA backend (design §4) against the
// cpu backend's dual pools (tests/dual_mamba2_test.cpp checks those against
// the fp64 oracle) with the same inputs: outputs every step, the copy equal
// to the CUDA quant_pack of the GPU checkpoint byte for byte after every
// call, non-flush steps leaving the checkpoint bytes unchanged, checkpoints
// independent of the read format (bit for bit, and equal to a
// single-precision CUDA pool's), speculative windows, pad rows, slot
// operations, rejected calls, and a captured CUDA graph. Outputs are
// NaN-poisoned before every call.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/ring.h"
#include "dual_test_util.h"
#include "gpu_util.h"
#include "replayssm/dual.h"
#include "replayssm/mamba2.h"

namespace replayssm::test {
namespace {

struct Shape {
  int64_t H, P, N, G;
};
// Model shapes (design §6) and an odd one (P = 80, N = 64, 2 heads per group).
const Shape MODEL_SHAPES[] = {{96, 80, 128, 8}, {64, 64, 128, 8}, {128, 64, 128, 8}, {256, 64, 128, 8}};
const Shape ODD = {6, 80, 64, 3};
const ReadFormat FORMATS[] = {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4};

std::string shape_name(const Shape& s) {
  return "H" + std::to_string(s.H) + " P" + std::to_string(s.P) + " N" + std::to_string(s.N) + " G" +
         std::to_string(s.G);
}

// GPU dual vs cpu dual, relative L2 per step window. Both decode copies
// packed from their own checkpoints, which agree to fp32 rounding, so a code
// near a rounding boundary may differ between them: a tenth of the format's
// oracle tolerance (dual_test_util.h), never below the checkpoint / output
// dtype's own tolerance.
double out_tol(ReadFormat f, DType state, DType act) {
  const auto rank = [](DType d) { return d == DType::bf16 ? 3 : d == DType::f16 ? 2 : 1; };
  const DType lim = rank(state) >= rank(act) ? state : act;
  return std::max(0.1 * dual_test::out_tolerance(f), tolerance(lim));
}

Exec cpu_exec() { return Exec{Backend::cpu, nullptr, 0, nullptr}; }
Exec cuda_exec(int32_t* status = nullptr) { return Exec{Backend::cuda, nullptr, 0, status}; }

double err(const HostTensor& a, const HostTensor& b) { return rel_err(a.to_f64(), b.to_f64()); }

class DeviceStatus {
 public:
  DeviceStatus() { HostTensor h(DType::i32, {1}); d_.upload(h); }
  Exec exec() const { return cuda_exec(static_cast<int32_t*>(d_.t().data)); }
  int32_t read() const { return int32_t(d_.to_host().get(0)); }

 private:
  DeviceTensor d_;
};

struct Layer {
  HostTensor A, dt_bias, D;
  Layer(std::mt19937& rng, int64_t H) : A(DType::f32, {H}), dt_bias(DType::f32, {H}), D(DType::f32, {H}) {
    std::uniform_real_distribution<double> u(0, 1);
    for (int64_t h = 0; h < H; ++h) {
      A.set(h, -std::exp(std::log(0.05) + u(rng) * std::log(8.0 / 0.05)));  // decays near 1 and far
      dt_bias.set(h, u(rng) - 0.5);
      D.set(h, 0.5 + u(rng));
    }
  }
};

// Inputs of one step [B, T, ...] on host and device.
struct Step {
  HostTensor x, dt, Bm, Cm, z, A, dt_bias, D, slot, y;
  bool has_z;
  DeviceTensor dx, ddt, dB, dC, dz, dA, dbias, dD, dslot, dy;
  Step(std::mt19937& rng, int64_t B, int64_t T, const Shape& s, DType act,
       const std::vector<int64_t>& slots, bool with_z, const Layer& layer)
      : x(act, {B, T, s.H, s.P}), dt(DType::f32, {B, T, s.H}), Bm(act, {B, T, s.G, s.N}),
        Cm(act, {B, T, s.G, s.N}), z(act, {B, T, s.H, s.P}), A(DType::f32, {s.H}),
        dt_bias(DType::f32, {s.H}), D(DType::f32, {s.H}), y(act, {B, T, s.H, s.P}), has_z(with_z) {
    randomize(rng);
    A.copy_from(layer.A), dt_bias.copy_from(layer.dt_bias), D.copy_from(layer.D);
    slot = index_tensor(slots);
    upload();
  }
  void randomize(std::mt19937& rng) {
    x.fill_normal(rng);
    dt.fill_uniform(rng, -4.0, 1.0);
    Bm.fill_normal(rng, 0, 0.3);
    Cm.fill_normal(rng, 0, 0.3);
    z.fill_normal(rng);
  }
  void upload() {
    dx.upload(x), ddt.upload(dt), dB.upload(Bm), dC.upload(Cm), dz.upload(z);
    dA.upload(A), dbias.upload(dt_bias), dD.upload(D), dslot.upload(slot);
    y.fill_nan();
    dy.upload(y);
  }
  Mamba2Step host() const {
    return Mamba2Step{x, dt, Bm, Cm, has_z ? z.t() : Tensor{}, A, dt_bias, D, true, slot, -1, y.t()};
  }
  Mamba2Step dev() const {
    return Mamba2Step{dx, ddt, dB, dC, has_z ? dz.t() : Tensor{}, dA, dbias, dD, true, dslot, -1, dy.t()};
  }
};

// A dual (or, without a format, single-precision) pool on host and device
// with identical initial bytes; the copy starts as quant_pack of the
// checkpoint. in_arena: the device tensors are pieces of one SlotArena
// (slot-major, the last slots past 2^31 elements; padded: 16 bytes after the
// checkpoint's and copy's rows, one element after the rings' and cursors')
// instead of dstate … dcopy.
struct Rig {
  Shape s;
  std::optional<ReadFormat> fmt;
  int64_t S, L;
  Layer layer;
  HostTensor state, rx, rdt, rB, cursor, copy;
  DeviceTensor dstate, drx, drdt, drB, dcursor, dcopy, dA;
  std::unique_ptr<SlotArena> arena;
  Rig(std::mt19937& rng, int64_t S_, const Shape& s_, DType sd, DType act, std::optional<ReadFormat> f,
      int64_t L_, int64_t T_max, bool in_arena = false, bool padded = false)
      : s(s_), fmt(f), S(S_), L(L_), layer(rng, s_.H), state(sd, {S_, s_.H, s_.P, s_.N}),
        rx(act, {S_, L_ + T_max, s_.H, s_.P}), rdt(DType::f32, {S_, L_ + T_max, s_.H}),
        rB(act, {S_, L_ + T_max, s_.G, s_.N}), cursor(DType::i32, {S_, 3}) {
    state.fill_uniform(rng, -1, 1);
    std::uniform_int_distribution<int> start(0, int(L_ + T_max - 1));
    for (int64_t i = 0; i < S; ++i) cursor.set(i * 3, start(rng));
    if (fmt) {
      copy.reset(DType::u8, {S, s.H, quant_layout(*fmt, s.P, s.N).tile_bytes});
      quant_pack(*fmt, flat_state(state.t()), flat_copy(copy.t()), cpu_exec());
    }
    dA.upload(layer.A);
    if (in_arena) {
      arena = std::make_unique<SlotArena>(S, cuda_arena_memory());
      for (const HostTensor* h : hosts())
        arena->add(h->t().dtype, std::vector<int64_t>(h->t().shape + 1, h->t().shape + h->t().ndim),
                   !padded ? 0 : h == &state || h == &copy ? 16 : dtype_size(h->t().dtype));
      arena->allocate();
      for (size_t i = 0; i < hosts().size(); ++i) arena->upload(int(i), *hosts()[i]);
      return;
    }
    dstate.upload(state), drx.upload(rx), drdt.upload(rdt), drB.upload(rB), dcursor.upload(cursor);
    if (fmt) dcopy.upload(copy);
  }
  // The pool's tensors: state, rx, rdt, rB, cursor, then the copy (dual).
  std::vector<const HostTensor*> hosts() const {
    std::vector<const HostTensor*> v = {&state, &rx, &rdt, &rB, &cursor};
    if (fmt) v.push_back(&copy);
    return v;
  }
  // Device tensor i of hosts(), and its bytes on the host.
  Tensor dev_t(int i) const {
    if (arena) return arena->view(i);
    const DeviceTensor* d[] = {&dstate, &drx, &drdt, &drB, &dcursor, &dcopy};
    return d[i]->t();
  }
  HostTensor dev_host(int i) const {
    if (arena) return arena->download(i);
    const DeviceTensor* d[] = {&dstate, &drx, &drdt, &drB, &dcursor, &dcopy};
    return d[i]->to_host();
  }
  Tensor flat_state(Tensor t) const { return Tensor::view(t.data, t.dtype, {S * s.H, s.P, s.N}, t.device); }
  Tensor flat_copy(Tensor t) const { return Tensor::view(t.data, DType::u8, {S * s.H, t.shape[2]}, t.device); }
  Mamba2Pool host() const {
    return Mamba2Pool{state, rx, rdt, rB, cursor, L, layer.A, fmt ? copy.t() : Tensor{}, fmt.value_or(ReadFormat::bf16)};
  }
  Mamba2Pool dev() const {
    return Mamba2Pool{dev_t(0), dev_t(1), dev_t(2), dev_t(3), dev_t(4), L, dA, fmt ? dev_t(5) : Tensor{},
                      fmt.value_or(ReadFormat::bf16)};
  }
  RingCursor cur(int64_t slot) const {
    return RingCursor{int32_t(cursor.get(slot * 3)), int32_t(cursor.get(slot * 3 + 1)), int32_t(cursor.get(slot * 3 + 2))};
  }
  // The GPU copy equals the CUDA quant_pack of the GPU checkpoint, byte for byte.
  bool copy_is_pack() const {
    HostTensor h(DType::u8, {S, s.H, copy.t().shape[2]});
    DeviceTensor packed(h);
    const DeviceTensor dense(dev_host(0));  // the checkpoint, contiguous
    quant_pack(*fmt, flat_state(dense.t()), flat_copy(packed.t()), cuda_exec());
    return packed.to_host().bytes_equal(dev_host(5));
  }
  // Every pool byte on the device (for "nothing written").
  std::vector<uint8_t> device_bytes() const {
    std::vector<uint8_t> v;
    for (size_t i = 0; i < hosts().size(); ++i) {
      const auto b = dual_test::all_bytes(dev_host(int(i)));
      v.insert(v.end(), b.begin(), b.end());
    }
    return v;
  }
  // Checkpoint within tol of the cpu backend's; cursors, x and B records exact.
  void expect_match(double tol, const std::string& what) const {
    EXPECT_LE(err(dev_host(0), state), tol) << what << ": checkpoint";
    EXPECT_TRUE(dev_host(4).bytes_equal(cursor)) << what << ": cursor";
    EXPECT_TRUE(dev_host(1).bytes_equal(rx)) << what << ": ring_x";
    EXPECT_TRUE(dev_host(3).bytes_equal(rB)) << what << ": ring_B";
    EXPECT_LE(err(dev_host(2), rdt), 1e-5) << what << ": ring_dt";
    if (fmt) EXPECT_TRUE(copy_is_pack()) << what << ": copy != quant_pack(checkpoint)";
    if (arena) arena->expect_guards(what);
  }
};

std::vector<uint8_t> slot_bytes(const HostTensor& t, int64_t slot) {
  const size_t row = t.bytes() / size_t(t.t().shape[0]);
  const auto* p = static_cast<const uint8_t*>(t.data()) + row * size_t(slot);
  return {p, p + row};
}

void expect_row_zero(const HostTensor& y, int64_t row, const std::string& what) {
  const int64_t per = y.numel() / y.t().shape[0];
  for (int64_t i = row * per; i < (row + 1) * per; ++i)
    if (y.get(i) != 0.0) { ADD_FAILURE() << what << ": pad row output not zero at " << i; return; }
}

struct RunResult {
  std::vector<uint8_t> gpu_state;
  std::vector<double> gpu_values;  // the same checkpoint widened (HostTensor::to_f64)
  int flushes = 0;
  double worst = 0;
};

// `steps` steps at batch 4 (slots {3, pad, 0, 4}) with T drawn from Ts.
// T_max = 1: plain decode (commit_all). Otherwise speculative: the previous
// window's acceptances (random in [1, T]) are committed at the step's start
// through num_accepted. cpu and cuda run the same inputs; every step checks
// outputs, cursors, non-flush checkpoint bytes and the copy invariant.
// B = 4: slots {3, pad, 0, 4} of 5; otherwise B rows over B + 2 slots in a
// random order, row 1 a pad row. in_arena: the device pool in a SlotArena
// (Rig's `padded` rows), row b on slot S − 1 − b (the far slots), row 1 a
// pad row.
RunResult run(const Shape& s, DType sd, DType act, std::optional<ReadFormat> fmt, uint32_t seed,
              int steps, int64_t L, const std::vector<int64_t>& Ts, int64_t B = 4, bool in_arena = false,
              bool padded = false, double tol_override = 0) {
  std::mt19937 rng(seed);
  const int64_t Tmax = *std::max_element(Ts.begin(), Ts.end());
  const bool spec = Tmax > 1;
  const int64_t S = B == 4 ? 5 : B + 2;
  Rig rig(rng, S, s, sd, act, fmt, L, Tmax, in_arena, padded);
  std::vector<int64_t> slots = B == 4 ? std::vector<int64_t>{3, -1, 0, 4} : shuffled_slots(B, S, rng);
  if (in_arena)
    for (int64_t b = 0; b < B; ++b) slots[size_t(b)] = b == 1 ? -1 : S - 1 - b;
  const double tol = tol_override > 0 ? tol_override : fmt ? out_tol(*fmt, sd, act) : 2 * tolerance(sd == DType::f32 ? act : sd);
  const std::string what = shape_name(s) + " state " + dtype_name(sd) + " act " + dtype_name(act) +
                           " copy " + (fmt ? read_format_name(*fmt) : "none");
  RunResult res;
  int64_t prevT = 0;
  for (int it = 0; it < steps; ++it) {
    const int64_t T = Ts[rng() % Ts.size()];
    Step st(rng, B, T, s, act, slots, it % 2 == 0, rig.layer);
    HostTensor acc(DType::i32, {B});
    for (int64_t b = 0; b < B; ++b) acc.set(b, double(1 + int64_t(rng() % uint32_t(std::max<int64_t>(prevT, 1)))));
    const DeviceTensor dacc(acc);
    const bool pass_acc = spec && prevT > 0;
    std::vector<bool> flushing(size_t(B), false);
    for (int64_t b = 0; b < B; ++b)
      if (slots[size_t(b)] >= 0)
        flushing[size_t(b)] = rig.cur(slots[size_t(b)]).count + (pass_acc ? int64_t(acc.get(b)) : 0) + T > L;
    const HostTensor before = rig.dev_host(0);
    mamba2_replay_step(st.host(), rig.host(), pass_acc ? acc.t() : Tensor{}, !spec, cpu_exec());
    DeviceStatus ds;
    mamba2_replay_step(st.dev(), rig.dev(), pass_acc ? dacc.t() : Tensor{}, !spec, ds.exec());
    EXPECT_EQ(ds.read(), 0) << what;
    const HostTensor y = st.dy.to_host();
    const double e = err(y, st.y);
    res.worst = std::max(res.worst, e);
    EXPECT_LE(e, tol) << what << " T=" << T << " step " << it;
    expect_row_zero(y, 1, what);
    const HostTensor after = rig.dev_host(0);
    for (int64_t b = 0; b < B; ++b) {
      if (slots[size_t(b)] < 0) continue;
      if (flushing[size_t(b)]) ++res.flushes;
      else EXPECT_EQ(slot_bytes(after, slots[size_t(b)]), slot_bytes(before, slots[size_t(b)]))
          << what << " step " << it << ": a non-flush step wrote the checkpoint";
    }
    EXPECT_TRUE(rig.dev_host(4).bytes_equal(rig.cursor)) << what << " step " << it << ": cursor";
    if (fmt) EXPECT_TRUE(rig.copy_is_pack()) << what << " step " << it << ": copy != quant_pack(checkpoint)";
    if (::testing::Test::HasFailure()) return res;
    prevT = T;
  }
  rig.expect_match(tol, what + " end");
  const HostTensor state = rig.dev_host(0);
  res.gpu_state = dual_test::all_bytes(state);
  res.gpu_values = state.to_f64();
  return res;
}

// ---------------------------------------------------------------------------

// Plain decode (T = 1, L = 4) at the model shapes and the odd one, every read
// format, checkpoints f32 and bf16.
TEST(DualMamba2Gpu, PlainDecodeAllShapesFormats) {
  RSSM_SKIP_WITHOUT_GPU();
  std::vector<Shape> shapes(std::begin(MODEL_SHAPES), std::end(MODEL_SHAPES));
  shapes.push_back(ODD);
  for (const Shape& s : shapes)
    for (DType sd : {DType::f32, DType::bf16})
      for (ReadFormat f : FORMATS) {
        const DType act = s.H == ODD.H ? DType::f32 : DType::bf16;
        const RunResult r = run(s, sd, act, f, 101, 10, 4, {1});
        EXPECT_GE(r.flushes, 6) << "the schedule must flush";
        RecordProperty(shape_name(s) + " " + dtype_name(sd) + " " + read_format_name(f), std::to_string(r.worst));
        if (HasFailure()) return;
      }
}

// The bulk-copy T = 1 stream over fp8 / nvfp4 copies (replay1_kernel.cuh,
// QF) on a small shape (8 heads of P = 64, N = 128, one group): whole and
// partial 256-row sweeps; small enough for compute-sanitizer
// (scripts/gpu_check.sh SANITIZE_FILTER).
TEST(DualMamba2Gpu, BulkCopySmall) {
  RSSM_SKIP_WITHOUT_GPU();
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    const RunResult r = run(Shape{8, 64, 128, 1}, DType::f32, DType::bf16, f, 303, 9, 4, {1});
    EXPECT_GE(r.flushes, 2) << "the schedule must flush";
    if (HasFailure()) return;
  }
}

// The same stream at 40 rows of H128 P64 (nemotron3), where the launcher
// takes its production tiles (4+ heads per block: whole 256-row sweeps).
TEST(DualMamba2Gpu, BulkCopyProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    const RunResult r = run(Shape{128, 64, 128, 8}, DType::f32, DType::bf16, f, 404, 6, 4, {1}, 40);
    EXPECT_GE(r.flushes, 39) << "the schedule must flush";
    if (HasFailure()) return;
  }
}

// The same stream with a group's 16 heads per block (H128 P64: 1,024 rows,
// four 256-row sweeps over two stages; the packed copy's history terms are
// formed in the epilogue, which is what leaves room for them). At B = 40 the
// launcher would halve the tile toward four blocks per SM; one block per SM
// as its target keeps the whole group.
TEST(DualMamba2Gpu, BulkCopyWholeGroupTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  ScopedEnv bps("REPLAYSSM_M2_R1_BPS", "1");
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    const RunResult r = run(Shape{128, 64, 128, 8}, DType::f32, DType::bf16, f, 505, 6, 4, {1}, 40);
    EXPECT_GE(r.flushes, 39) << "the schedule must flush";
    if (HasFailure()) return;
  }
}

// The packed-copy stream's products to the fp32 rounding of the cpu
// backend's: fp32 states and activations, 40 rows of H128 P64 (production
// tiles), 7 steps at L = 8, so no row flushes and every output is the copy's
// product with C_t plus the history. The nvfp4 sweeps run on tensor cores
// (f16 codes, C split into f16 hi + lo parts), the fp8 ones on CUDA cores.
TEST(DualMamba2Gpu, PackedCopyReadsMatchCpuBeforeAFlush) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 606;
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    SCOPED_TRACE(read_format_name(f));
    const RunResult r = run(Shape{128, 64, 128, 8}, DType::f32, DType::f32, f, seed++, 7, 8, {1}, 40, false, false, 2e-6);
    EXPECT_EQ(r.flushes, 0);
    if (HasFailure()) return;
  }
}

// One process driving two GPUs: the packed-copy stream and the pack kernel
// (its shared-memory limit is per device) on each device in turn.
TEST(DualMamba2Gpu, EachDevice) {
  RSSM_SKIP_WITHOUT_GPU();
  RSSM_ON_EACH_DEVICE([&](int dev) {
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      const RunResult r = run(Shape{128, 64, 128, 8}, DType::f32, DType::bf16, f, 505 + uint32_t(dev), 6, 4, {1}, 40);
      EXPECT_GE(r.flushes, 39) << "the schedule must flush";
      if (HasFailure()) return;
    }
  });
}

// The device pool as pieces of one SlotArena (slot strides of gigabytes,
// the last slots past 2^31 elements of every tensor, read copy included),
// its rows on the far slots, dense or padded rows (Rig: strides larger than
// dense, odd ones for the rings): T = 1 at batch 4 and 40 (the pack kernel's
// fold of flushing rows, the packed-copy stream's block and production
// tiles), speculative windows of 2–5 tokens; every step against the cpu
// backend as run() checks it, and the guard bands and row padding untouched.
TEST(DualMamba2Gpu, ArenaPools) {
  RSSM_SKIP_WITHOUT_GPU();
  const Shape s{128, 64, 128, 8};
  uint32_t seed = 505;
  for (const auto& [f, pad] : {std::pair{ReadFormat::fp8_e4m3, false}, std::pair{ReadFormat::fp8_e4m3, true},
                               std::pair{ReadFormat::nvfp4, true}, std::pair{ReadFormat::bf16, false}}) {
    SCOPED_TRACE(std::string(read_format_name(f)) + (pad ? " padded rows" : ""));
    for (int64_t B : {4, 40}) {
      const RunResult r = run(s, DType::f32, DType::bf16, f, seed++, 6, 4, {1}, B, true, pad);
      EXPECT_EQ(r.flushes, B - 1) << B << " rows";
      if (HasFailure()) return;
    }
    const RunResult r = run(s, DType::f32, DType::bf16, f, seed++, 8, 8, {2, 5}, 4, true, pad);
    EXPECT_GT(r.flushes, 0) << "the speculative schedule must flush";
    if (HasFailure()) return;
  }
}

// BulkCopySmall with the L2 prefetch of the block ahead forced
// (REPLAYSSM_M2_PF = 1: every block prefetches the next one's slot, cursor,
// tokens and records; replay1_kernel.cuh AheadRow) and T = 5 on the same
// kernel's tensor-core stream (bf16 copy).
TEST(DualMamba2Gpu, PrefetchAhead) {
  RSSM_SKIP_WITHOUT_GPU();
  ScopedEnv pf("REPLAYSSM_M2_PF", "1");
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4, ReadFormat::bf16}) {
    const RunResult r = run(Shape{8, 64, 128, 1}, DType::f32, DType::bf16, f, 305, 9, 4, {1});
    EXPECT_GE(r.flushes, 2) << "the schedule must flush";
    if (HasFailure()) return;
  }
  const RunResult r = run(Shape{8, 64, 128, 1}, DType::f32, DType::bf16, ReadFormat::bf16, 306, 12, 8, {5});
  EXPECT_GE(r.flushes, 2) << "the schedule must flush";
}

// Speculative windows T in {2, 5, 8} with random acceptances (L = 16).
TEST(DualMamba2Gpu, SpeculativeRandomAcceptances) {
  RSSM_SKIP_WITHOUT_GPU();
  for (const Shape& s : {ODD, Shape{64, 64, 128, 8}})
    for (ReadFormat f : FORMATS)
      for (DType sd : {DType::f32, DType::bf16}) {
        const RunResult r = run(s, sd, DType::bf16, f, 202, 24, 16, {2, 5, 8});
        EXPECT_GE(r.flushes, 4) << "the schedule must flush";
        if (HasFailure()) return;
      }
}

// §5.5: the checkpoint does not depend on the copy's format, and equals that
// of a single-precision CUDA pool run on the same inputs, bit for bit, where
// both fold as the FMA stream (REPLAYSSM_M2_FOLD_TC=0 for the
// single-precision pool). By default a single-precision step folds on tensor
// cores (heuristics.h replay1_fold_tc; not T = 1 with bf16 states, which
// keeps the FMA stream), another rounding of the same sums:
// within the state dtype's tolerance of the dual checkpoint (the dual pool's
// flushes are the pack's, the FMA stream).
TEST(DualMamba2Gpu, CheckpointBitIdenticalAcrossFormats) {
  RSSM_SKIP_WITHOUT_GPU();
  for (const Shape& s : {ODD, Shape{96, 80, 128, 8}})
    for (DType sd : {DType::f32, DType::bf16})
      for (const std::vector<int64_t>& Ts : {std::vector<int64_t>{1}, std::vector<int64_t>{2, 5, 8}}) {
        const int64_t L = Ts.size() == 1 ? 4 : 16;
        const std::string what = shape_name(s) + " " + dtype_name(sd) + " T_max " + std::to_string(Ts.back());
        const RunResult single = [&] {
          ScopedEnv fma("REPLAYSSM_M2_FOLD_TC", "0");
          return run(s, sd, DType::bf16, std::nullopt, 303, 20, L, Ts);
        }();
        const RunResult base = run(s, sd, DType::bf16, ReadFormat::bf16, 303, 20, L, Ts);
        EXPECT_GE(base.flushes, 6) << what;
        EXPECT_EQ(base.gpu_state, single.gpu_state) << what << ": dual checkpoint != single-precision checkpoint";
        const RunResult tc = run(s, sd, DType::bf16, std::nullopt, 303, 20, L, Ts);
        EXPECT_LE(rel_err(tc.gpu_values, base.gpu_values), tolerance(sd))
            << what << ": tensor-core fold's checkpoint vs the dual pool's";
        for (ReadFormat f : {ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
          const RunResult r = run(s, sd, DType::bf16, f, 303, 20, L, Ts);
          EXPECT_EQ(r.gpu_state, base.gpu_state) << what << " " << read_format_name(f) << " vs bf16 copy";
        }
        if (HasFailure()) return;
      }
}

// Prefill (from zero and from the current state, a pad row, an empty
// prompt), materialize, flush, copy, reset, then more steps.
TEST(DualMamba2Gpu, SlotOperationsKeepTheCopy) {
  RSSM_SKIP_WITHOUT_GPU();
  for (const Shape& s : {ODD, Shape{128, 64, 128, 8}})
    for (ReadFormat f : FORMATS) {
      std::mt19937 rng(404);
      const DType sd = DType::f32, act = DType::bf16;
      const double tol = out_tol(f, sd, act);
      const std::string what = shape_name(s) + " " + read_format_name(f);
      Rig rig(rng, 6, s, sd, act, f, 8, 2);
      for (int it = 0; it < 5; ++it) {  // committed records on slots 0, 2, 5
        Step st(rng, 3, 1, s, act, {0, 2, 5}, false, rig.layer);
        mamba2_replay_step(st.host(), rig.host(), Tensor{}, true, cpu_exec());
        mamba2_replay_step(st.dev(), rig.dev(), Tensor{}, true, cuda_exec());
      }
      rig.expect_match(tol, what + " steps");
      // materialize (from the high-precision checkpoint)
      HostTensor ms = index_tensor({5, -1, 2, 0});
      const DeviceTensor dms(ms);
      HostTensor out(DType::f32, {4, s.H, s.P, s.N});
      out.fill(0.0);
      DeviceTensor dout(out);
      mamba2_materialize(rig.host(), ms, -1, out, cpu_exec());
      mamba2_materialize(rig.dev(), dms, -1, dout, cuda_exec());
      EXPECT_LE(err(dout.to_host(), out), 2 * tolerance(DType::f32)) << what << " materialize";
      // flush
      HostTensor fl = index_tensor({2, -1});
      const DeviceTensor dfl(fl);
      mamba2_flush(rig.host(), fl, -1, cpu_exec());
      mamba2_flush(rig.dev(), dfl, -1, cuda_exec());
      rig.expect_match(tol, what + " flush");
      // copy
      HostTensor src = index_tensor({0, 5}), dst = index_tensor({1, 3});
      const DeviceTensor dsrc(src), ddst(dst);
      mamba2_copy_slot(rig.host(), src, dst, -1, cpu_exec());
      mamba2_copy_slot(rig.dev(), dsrc, ddst, -1, cuda_exec());
      rig.expect_match(tol, what + " copy");
      const HostTensor gc = rig.dev_host(5);
      EXPECT_EQ(slot_bytes(gc, 1), slot_bytes(gc, 0)) << what << " copied read copy";
      // reset
      HostTensor rs = index_tensor({5, -1});
      const DeviceTensor drs(rs);
      mamba2_reset_slot(rig.host(), rs, -1, cpu_exec());
      mamba2_reset_slot(rig.dev(), drs, -1, cuda_exec());
      rig.expect_match(tol, what + " reset");
      // varlen prefill: slot 4 from zero, pad, slot 2 from its state, slot 1 empty prompt
      const std::vector<int64_t> cu = {0, 13, 20, 29, 29};
      Step pf(rng, 1, cu.back(), s, act, {0}, true, rig.layer);
      auto flat = [](Tensor v) {  // [1, tokens, ...] as [tokens, ...]
        for (int i = 1; i < v.ndim; ++i) {
          v.shape[i - 1] = i == 1 ? v.shape[0] * v.shape[1] : v.shape[i];
          v.stride[i - 1] = v.stride[i];
        }
        v.ndim -= 1;
        return v;
      };
      HostTensor cuh = index_tensor(cu), ps = index_tensor({4, -1, 2, 1}), init = index_tensor({0, 0, 1, 1});
      const DeviceTensor dcu(cuh), dps(ps), dinit(init);
      Mamba2Prefill hp{flat(pf.x), flat(pf.dt), flat(pf.Bm), flat(pf.Cm), flat(pf.z), pf.A, pf.dt_bias, pf.D, true, cuh, ps, -1, init, flat(pf.y)};
      Mamba2Prefill dp{flat(pf.dx), flat(pf.ddt), flat(pf.dB), flat(pf.dC), flat(pf.dz), pf.dA, pf.dbias, pf.dD, true, dcu, dps, -1, dinit, flat(pf.dy)};
      mamba2_prefill(hp, rig.host(), cpu_exec());
      DeviceStatus ds;
      mamba2_prefill(dp, rig.dev(), ds.exec());
      EXPECT_EQ(ds.read(), 0);
      const HostTensor py = pf.dy.to_host();
      EXPECT_LE(err(py, pf.y), 2 * tolerance(act)) << what << " prefill outputs";
      for (int64_t i = 13 * s.H * s.P; i < 20 * s.H * s.P; ++i)
        if (py.get(i) != 0.0) { ADD_FAILURE() << "pad prompt output not zero"; break; }
      rig.expect_match(tol, what + " prefill");
      // every slot keeps stepping
      for (int it = 0; it < 9; ++it) {
        Step st(rng, 4, 1, s, act, {1, 3, 4, 5}, it % 2 == 0, rig.layer);
        mamba2_replay_step(st.host(), rig.host(), Tensor{}, true, cpu_exec());
        mamba2_replay_step(st.dev(), rig.dev(), Tensor{}, true, cuda_exec());
        EXPECT_LE(err(st.dy.to_host(), st.y), tol) << what << " after slot ops, step " << it;
      }
      rig.expect_match(tol, what + " after slot ops");
      if (HasFailure()) return;
    }
}

// Rejected calls: host-side errors name the argument and write nothing;
// device-side errors (bad slot, bad accepted count) set the status bit and
// skip the row: every pool byte is unchanged.
TEST(DualMamba2Gpu, RejectedCallsWriteNothing) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(505);
  const Shape s = ODD;
  Rig rig(rng, 4, s, DType::f32, DType::f32, ReadFormat::nvfp4, 4, 2);
  for (int it = 0; it < 6; ++it) {  // a pool mid-stream (one flush on each slot)
    Step st(rng, 2, 1, s, DType::f32, {0, 2}, false, rig.layer);
    mamba2_replay_step(st.dev(), rig.dev(), Tensor{}, true, cuda_exec());
  }
  const std::vector<uint8_t> bytes0 = rig.device_bytes();
  Step st(rng, 2, 1, s, DType::f32, {0, 2}, false, rig.layer);
  auto expect_error = [&](const char* arg, const Mamba2Pool& p) {
    try {
      mamba2_replay_step(st.dev(), p, Tensor{}, true, cuda_exec());
      ADD_FAILURE() << "no error for " << arg;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
    EXPECT_EQ(rig.device_bytes(), bytes0) << arg;
  };
  const int64_t tile = quant_layout(ReadFormat::nvfp4, s.P, s.N).tile_bytes;
  {
    HostTensor small(DType::u8, {4, s.H, tile - 16});
    const DeviceTensor dsmall(small);
    Mamba2Pool p = rig.dev();
    p.read_copy = dsmall;
    expect_error("pool.read_copy", p);  // too small
    p = rig.dev();
    p.read_format = ReadFormat::fp8_e4m3;
    expect_error("pool.read_copy", p);  // sized for another format
    p = rig.dev();
    p.read_copy = rig.copy;  // host tensor
    expect_error("pool.read_copy", p);
  }
  {  // nvfp4 on the cuda backend needs N a multiple of 32
    const Shape s48{2, 16, 48, 1};
    std::mt19937 r2(1);
    Rig r48(r2, 2, s48, DType::f32, DType::f32, ReadFormat::nvfp4, 4, 1);
    Step st48(r2, 1, 1, s48, DType::f32, {1}, false, r48.layer);
    const std::vector<uint8_t> b48 = r48.device_bytes();
    try {
      mamba2_replay_step(st48.dev(), r48.dev(), Tensor{}, true, cuda_exec());
      ADD_FAILURE() << "no error for N = 48";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), std::string("pool.read_format")) << e.what();
    }
    EXPECT_EQ(r48.device_bytes(), b48);
  }
  {  // bad slot
    Step bad(rng, 1, 1, s, DType::f32, {9}, false, rig.layer);
    DeviceStatus ds;
    mamba2_replay_step(bad.dev(), rig.dev(), Tensor{}, true, ds.exec());
    EXPECT_NE(ds.read() & STATUS_BAD_SLOT, 0);
    EXPECT_EQ(rig.device_bytes(), bytes0) << "bad slot";
  }
  {  // accepted count with nothing pending, and a flush of a slot with pending records
    HostTensor acc = index_tensor({1, 1});
    const DeviceTensor dacc(acc);
    DeviceStatus ds;
    mamba2_replay_step(st.dev(), rig.dev(), dacc, true, ds.exec());
    EXPECT_NE(ds.read() & STATUS_BAD_ACCEPTED, 0);
    EXPECT_EQ(rig.device_bytes(), bytes0) << "bad accepted count";
    Step w(rng, 1, 2, s, DType::f32, {2}, false, rig.layer);
    mamba2_replay_step(w.dev(), rig.dev(), Tensor{}, false, cuda_exec());  // leaves 2 pending
    const std::vector<uint8_t> bytes1 = rig.device_bytes();
    HostTensor fl = index_tensor({2});
    const DeviceTensor dfl(fl);
    DeviceStatus ds2;
    mamba2_flush(rig.dev(), dfl, -1, ds2.exec());
    EXPECT_NE(ds2.read() & STATUS_UNCOMMITTED, 0);
    EXPECT_EQ(rig.device_bytes(), bytes1) << "flush with pending records";
  }
}

// Step (speculative, T = 5) + commit captured once in a CUDA graph, replayed
// 60 times with new inputs and acceptances uploaded between replays.
TEST(DualMamba2Gpu, GraphReplayStepAndCommit) {
  RSSM_SKIP_WITHOUT_GPU();
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4, ReadFormat::bf16}) {
    std::mt19937 rng(606);
    const Shape s{16, 64, 128, 4};
    const DType sd = DType::f32, act = DType::bf16;
    const double tol = out_tol(f, sd, act);
    const int64_t T = 5, L = 8;
    Rig rig(rng, 6, s, sd, act, f, L, T);
    Step st(rng, 3, T, s, act, {4, -1, 1}, true, rig.layer);
    HostTensor slots = index_tensor({4, -1, 1}), acc(DType::i32, {3});
    acc.fill(1.0);
    DeviceTensor dslots(slots), dacc(acc);
    CapturedGraph graph;
    graph.capture([&] {
      const Exec ge = graph.exec(Exec{Backend::cuda});
      mamba2_replay_step(st.dev(), rig.dev(), Tensor{}, false, ge);
      mamba2_commit(rig.dev(), dslots, -1, dacc, ge);
    });
    std::uniform_int_distribution<int> a(1, int(T));
    int flushes = 0;
    for (int it = 0; it < 60; ++it) {
      st.randomize(rng);
      st.upload();
      for (int b = 0; b < 3; ++b) acc.set(b, a(rng));
      dacc.upload(acc);
      flushes += rig.cur(4).count + T > L;
      graph.replay();
      mamba2_replay_step(st.host(), rig.host(), Tensor{}, false, cpu_exec());
      mamba2_commit(rig.host(), slots, -1, acc, cpu_exec());
      EXPECT_LE(err(st.dy.to_host(), st.y), tol) << read_format_name(f) << " replay " << it;
      expect_row_zero(st.dy.to_host(), 1, "graph");
      if (it % 10 == 9) rig.expect_match(tol, std::string("graph ") + read_format_name(f));
      if (HasFailure()) break;
    }
    EXPECT_GE(flushes, 20);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace replayssm::test

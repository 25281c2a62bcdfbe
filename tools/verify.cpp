// `replayssm verify`: the invariants of design/replay.md §5 at the model
// shapes of §6, on one backend, against the standard recurrence computed by
// the reference backend on a baseline pool.
//
// Per family and shape: B = 4 rows (3 live rows on random distinct slots of a
// 7-slot pool, 1 pad row), random starting ring positions, a prompt per row,
// then `steps` replay steps mixing plain decode (T = 1, commit_all) and
// speculative windows (T ∈ {2, 5, 8}, random accepted counts committed by the
// next step). Checked at every step:
//   out      replay outputs of all T window tokens vs the standard recurrence
//            (token t sees the committed history plus window tokens 0..t),
//            computed token by token by the reference decode
//   ckpt     a row that flushes holds the standard state at the flushed count;
//            a row that does not flush keeps its checkpoint bytes
//   cursor   {start, count, pending} follow ring_plan_step / ring_commit
//   pad      pad and unused slots: state, rings and cursor bytes never change;
//            pad outputs are zero
//   no trace a twin pool gets the same steps with the rejected draft tokens
//            replaced by other random values: accepted outputs, checkpoints and
//            cursors are bit-identical
//   mat      materialise (whenever nothing is pending) equals the standard
//            state and writes nothing
// Then, on every backend, the dual-precision invariants of
// tools/verify_dual.cpp (one extra line per family).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "common.h"
#include "core/ring.h"
#include "verify_case.h"

namespace replayssm::tools {
namespace {

struct Options {
  Backend backend = Backend::cpu;
  std::string family = "all";
  int64_t steps = 40;
  int64_t L = 0;  // 0 = preset default
  bool quick = false;
  bool verbose = false;
  bool dual = true;
  DType state = DType::f32, act = DType::f32;
  uint64_t seed = 1;
};

// Relative L2 error allowed against the fp64 reference, keyed by the dtype
// that limits precision (same values as tests/test_util.h::tolerance).
double tolerance(DType limiting) {
  switch (limiting) {
    case DType::f32: return 2e-5;
    case DType::f16: return 4e-3;
    case DType::bf16: return 3e-2;
    default: return 0;
  }
}
DType limiting(DType a, DType b) {
  auto rank = [](DType d) { return d == DType::bf16 ? 2 : d == DType::f16 ? 1 : 0; };
  return rank(a) >= rank(b) ? a : b;
}

struct Result {
  double out = 0, ckpt = 0, mat = 0, prefill = 0;
  int64_t flushes = 0, spec_steps = 0, tokens = 0;
  std::vector<std::string> failures;
  int64_t failure_count = 0;
};

constexpr int64_t ROWS = 4, SLOTS = 7, PAD = -1;

class Runner {
 public:
  Runner(FamilyCase& fc, const Options& o, int64_t L, double tol, uint64_t seed)
      : fc_(fc), o_(o), L_(L), T_max_(std::min<int64_t>(8, L)), tol_(tol), rng_(seed) {
    where_ = device_of(o.backend);
    ex_.backend = o.backend;
    ref_.backend = Backend::reference;
    if (o.backend == Backend::cuda) {
      status_ = Buf(DType::i32, {1}, Device::cuda);
      ex_.device_status = static_cast<int32_t*>(status_.t().data);
    }
    R_ = fc.ring_length(L_, T_max_);
  }

  Result run(int64_t steps) {
    setup();
    prefill();
    for (int64_t s = 0; s < steps; ++s) step(s);
    finish();
    return res_;
  }

 private:
  // ---- pools and buffers ----
  std::vector<Buf> make_pool(Device where, DType state_dtype, bool rings) {
    std::vector<Buf> p;
    std::vector<int64_t> sh = {SLOTS};
    for (int64_t d : fc_.state_inner()) sh.push_back(d);
    p.emplace_back(state_dtype, sh, where);
    for (const RingSpec& r : fc_.rings()) {
      std::vector<int64_t> rs = {SLOTS, R_};
      rs.insert(rs.end(), r.inner.begin(), r.inner.end());
      p.push_back(rings ? Buf(r.dtype, rs, where) : Buf());
    }
    p.push_back(rings ? Buf(DType::i32, {SLOTS, CURSOR_FIELDS}, where) : Buf());
    return p;
  }
  PoolArgs args(const std::vector<Buf>& p, bool host) const {
    PoolArgs a;
    a.L = L_;
    for (const Buf& b : p) a.t.push_back(b.numel() == 0 ? Tensor{} : host ? b.host() : b.t());
    return a;
  }
  std::vector<Buf> make_inputs(std::vector<int64_t> lead, Device where) {
    std::vector<Buf> in;
    for (const InputSpec& s : fc_.inputs()) {
      std::vector<int64_t> sh = lead;
      sh.insert(sh.end(), s.inner.begin(), s.inner.end());
      in.emplace_back(s.dtype, sh, where);
      randomize(in.back(), s, 0, in.back().numel());
    }
    return in;
  }
  void randomize(Buf& b, const InputSpec& s, int64_t begin, int64_t end) {
    std::normal_distribution<double> nd(s.a, s.b);
    std::uniform_real_distribution<double> ud(s.a, s.b);
    for (int64_t i = begin; i < end; ++i) b.set(i, s.normal ? nd(rng_) : ud(rng_));
  }
  // Finite values in [-1, 1) from a cheap generator (pools are large).
  void garbage(Buf& b) {
    uint64_t x = rng_() | 1;
    for (int64_t i = 0; i < b.numel(); ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b.set(i, double(int64_t(x >> 11) - (int64_t(1) << 52)) * 0x1p-52);
    }
  }
  Buf make_out(std::vector<int64_t> lead) {
    for (int64_t d : fc_.out_inner()) lead.push_back(d);
    return Buf(o_.act, lead, where_);
  }
  static void poison(Buf& b) {
    for (int64_t i = 0; i < b.numel(); ++i) b.set(i, std::nan(""));
    b.upload();
  }
  static void upload_all(const std::vector<Buf>& v) { for (const Buf& b : v) b.upload(); }
  static void download_all(const std::vector<Buf>& v) { for (const Buf& b : v) b.download(); }
  static std::vector<Tensor> views(const std::vector<Buf>& v, bool host) {
    std::vector<Tensor> t;
    for (const Buf& b : v) t.push_back(host ? b.host() : b.t());
    return t;
  }
  static std::vector<uint8_t> snapshot(const Buf& b) { return std::vector<uint8_t>(b.raw(), b.raw() + b.bytes()); }
  // Bytes of slot s in a pool tensor (leading dim = slot, contiguous).
  static size_t row_bytes(const Buf& b) { return b.bytes() / size_t(b.host().shape[0]); }

  void sync_status(const char* what) {
    if (ex_.device_status) check_device_status(ex_, what);
  }
  void fail(int64_t step, const std::string& msg) {
    ++res_.failure_count;
    if (res_.failures.size() < 8) res_.failures.push_back("step " + std::to_string(step) + ": " + msg);
  }

  // ---- phases ----
  void setup() {
    std::vector<int64_t> perm(SLOTS);
    for (int64_t i = 0; i < SLOTS; ++i) perm[size_t(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng_);
    const int64_t pad_row = int64_t(rng_() % ROWS);
    slot_ = Buf(DType::i32, {ROWS}, where_);
    for (int64_t b = 0, k = 0; b < ROWS; ++b) {
      slots_.push_back(b == pad_row ? PAD : perm[size_t(k++)]);
      slot_.set(b, double(slots_.back()));
    }
    slot_.upload();
    main_ = make_pool(where_, o_.state, true);
    twin_ = make_pool(where_, o_.state, true);
    base_ = Buf(DType::f32, shape_of(main_[0]));
    // Garbage everywhere (prefill overwrites live checkpoints; rings are only
    // read where written), random ring starts, empty cursors.
    for (size_t i = 0; i + 1 < main_.size(); ++i) garbage(main_[i]);
    Buf& cur = main_.back();
    for (int64_t s = 0; s < SLOTS; ++s) cur.as<int32_t>()[s * CURSOR_FIELDS] = int32_t(rng_() % uint64_t(R_));
    for (size_t i = 0; i < main_.size(); ++i) std::memcpy(twin_[i].raw(), main_[i].raw(), main_[i].bytes());
    upload_all(main_);
    upload_all(twin_);
    for (const Buf& b : main_) initial_.push_back(snapshot(b));
    cursors_.assign(ROWS, RingCursor{0, 0, 0});
    for (int64_t b = 0; b < ROWS; ++b)
      if (slots_[size_t(b)] != PAD) cursors_[size_t(b)].start = cur.as<int32_t>()[slots_[size_t(b)] * CURSOR_FIELDS];
  }
  static std::vector<int64_t> shape_of(const Buf& b) {
    return std::vector<int64_t>(b.host().shape, b.host().shape + b.host().ndim);
  }

  void prefill() {
    std::vector<int64_t> cu = {0};
    for (int64_t b = 0; b < ROWS; ++b) cu.push_back(cu.back() + 1 + int64_t(rng_() % 6));
    const int64_t tokens = cu.back();
    Buf cu_t(DType::i32, {ROWS + 1}, where_);
    for (int64_t b = 0; b <= ROWS; ++b) cu_t.set(b, double(cu[size_t(b)]));
    cu_t.upload();
    std::vector<Buf> in = make_inputs({tokens}, where_);
    upload_all(in);
    Buf out = make_out({tokens}), out_ref = make_out({tokens}), out_twin = make_out({tokens});
    poison(out);
    poison(out_twin);
    fc_.prefill({views(in, false), out.t(), slot_.t(), PAD}, cu_t.t(), args(main_, false), ex_);
    fc_.prefill({views(in, false), out_twin.t(), slot_.t(), PAD}, cu_t.t(), args(twin_, false), ex_);
    sync_status("verify: prefill");
    std::vector<Buf> base_pool;
    base_pool.push_back(std::move(base_));
    for (size_t i = 1; i < main_.size(); ++i) base_pool.emplace_back();
    fc_.prefill({views(in, true), out_ref.host(), slot_.host(), PAD}, cu_t.host(), args(base_pool, true), ref_);
    base_ = std::move(base_pool[0]);
    out.download();
    download_all(main_);
    const int64_t per_tok = out.numel() / tokens;
    for (int64_t b = 0; b < ROWS; ++b) {
      if (slots_[size_t(b)] == PAD) continue;
      ErrAcc e;
      for (int64_t i = cu[size_t(b)] * per_tok; i < cu[size_t(b) + 1] * per_tok; ++i) e.add(out.get(i), out_ref.get(i));
      res_.prefill = std::max(res_.prefill, e.value());
    }
    check_cursors(-1);
    check_untouched(-1);
  }

  void step(int64_t s) {
    const bool spec = rng_() % 2 == 1;
    const int64_t choices[3] = {2, 5, 8};
    int64_t T = spec ? std::min(choices[rng_() % 3], T_max_) : 1;
    if (T < 2) T = 1;
    std::vector<int64_t> acc(ROWS, T);
    if (T > 1) {
      for (int64_t& a : acc) a = 1 + int64_t(rng_() % uint64_t(T));
      ++res_.spec_steps;
    }
    const bool commit_all = T == 1;

    // Inputs: the twin's rejected tokens (t >= accepted) are redrawn.
    std::vector<Buf> in = make_inputs({ROWS, T}, where_), in_twin = make_inputs({ROWS, T}, where_);
    const std::vector<InputSpec> specs = fc_.inputs();
    for (size_t i = 0; i < in.size(); ++i) {
      std::memcpy(in_twin[i].raw(), in[i].raw(), in[i].bytes());
      const int64_t per_tok = in[i].numel() / (ROWS * T);
      for (int64_t b = 0; b < ROWS; ++b)
        randomize(in_twin[i], specs[i], (b * T + acc[size_t(b)]) * per_tok, (b + 1) * T * per_tok);
    }
    upload_all(in);
    upload_all(in_twin);

    // Mirror of the ring bookkeeping.
    const std::vector<bool> flush =
        mirror_replay_step(cursors_, slots_, PAD, prev_acc_, T, L_, R_, commit_all, &res_.flushes);
    res_.tokens += T;

    // Standard recurrence, one token at a time on the baseline: token t of
    // every live row gives the window outputs; a row's state after its
    // accepted tokens is set aside when t reaches its count and put back at
    // the end, so the baseline advances by the accepted tokens only.
    Buf committed(DType::f32, shape_of(base_));
    std::memcpy(committed.raw(), base_.raw(), base_.bytes());
    Buf y_ref = make_out({ROWS, T});
    const size_t srow = row_bytes(base_);
    std::vector<std::vector<uint8_t>> kept(ROWS);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t r = 0; r < ROWS; ++r)
        if (slots_[size_t(r)] != PAD && acc[size_t(r)] == t) {
          const uint8_t* row = base_.raw() + size_t(slots_[size_t(r)]) * srow;
          kept[size_t(r)].assign(row, row + srow);
        }
      std::vector<Buf> tok;
      for (const Buf& b : in) {
        std::vector<int64_t> sh = shape_of(b);
        sh[1] = 1;
        tok.emplace_back(b.host().dtype, sh);
        const size_t per = b.bytes() / size_t(ROWS * T);
        for (int64_t r = 0; r < ROWS; ++r)
          std::memcpy(tok.back().raw() + size_t(r) * per, b.raw() + size_t(r * T + t) * per, per);
      }
      Buf y1 = make_out({ROWS, 1});
      fc_.decode({views(tok, true), y1.host(), slot_.host(), PAD}, base_.host(), ref_);
      const size_t per = y1.bytes() / size_t(ROWS);
      for (int64_t r = 0; r < ROWS; ++r)
        std::memcpy(y_ref.raw() + size_t(r * T + t) * per, y1.raw() + size_t(r) * per, per);
    }
    for (int64_t r = 0; r < ROWS; ++r)
      if (!kept[size_t(r)].empty())
        std::memcpy(base_.raw() + size_t(slots_[size_t(r)]) * srow, kept[size_t(r)].data(), srow);

    // Replay on the backend under test (main and twin).
    std::vector<uint8_t> before_state = snapshot(main_[0]);
    Buf num_acc(DType::i32, {ROWS}, where_);
    for (int64_t b = 0; b < ROWS; ++b) num_acc.set(b, double(prev_acc_.empty() ? 1 : prev_acc_[size_t(b)]));
    num_acc.upload();
    const Tensor acc_t = prev_pending_ ? num_acc.t() : Tensor{};
    Buf y = make_out({ROWS, T}), y_twin = make_out({ROWS, T});
    poison(y);
    poison(y_twin);
    fc_.replay_step({views(in, false), y.t(), slot_.t(), PAD}, args(main_, false), acc_t, commit_all, ex_);
    fc_.replay_step({views(in_twin, false), y_twin.t(), slot_.t(), PAD}, args(twin_, false), acc_t, commit_all, ex_);
    sync_status("verify: replay_step");
    y.download();
    y_twin.download();
    download_all(main_);
    download_all(twin_);

    // out, pad outputs, no-trace outputs.
    const int64_t per_tok = y.numel() / (ROWS * T);
    const size_t esz = dtype_size(o_.act);
    for (int64_t b = 0; b < ROWS; ++b) {
      const int64_t lo = b * T * per_tok, hi = (b + 1) * T * per_tok;
      if (slots_[size_t(b)] == PAD) {
        for (int64_t i = lo; i < hi; ++i)
          if (y.get(i) != 0.0) { fail(s, "pad row output is not zero"); break; }
        continue;
      }
      ErrAcc e;
      for (int64_t i = lo; i < hi; ++i) e.add(y.get(i), y_ref.get(i));
      res_.out = std::max(res_.out, e.value());
      if (!(e.value() <= tol_)) fail(s, "output rel err " + fmt(e.value()) + " (T=" + std::to_string(T) + ")");
      const size_t kept = size_t(acc[size_t(b)] * per_tok) * esz;
      if (std::memcmp(y.raw() + size_t(lo) * esz, y_twin.raw() + size_t(lo) * esz, kept) != 0)
        fail(s, "accepted outputs depend on rejected drafts (twin differs)");
    }

    // ckpt: flushed rows hold the committed standard state; others are unchanged.
    const Buf& st = main_[0];
    const size_t rb = row_bytes(st);
    const int64_t re = st.numel() / SLOTS;
    for (int64_t b = 0; b < ROWS; ++b) {
      const int64_t sl = slots_[size_t(b)];
      if (sl == PAD) continue;
      if (flush[size_t(b)]) {
        ErrAcc e;
        for (int64_t i = sl * re; i < (sl + 1) * re; ++i) e.add(st.get(i), committed.get(i));
        res_.ckpt = std::max(res_.ckpt, e.value());
        if (!(e.value() <= tol_)) fail(s, "checkpoint after flush rel err " + fmt(e.value()));
      } else if (std::memcmp(st.raw() + size_t(sl) * rb, before_state.data() + size_t(sl) * rb, rb) != 0) {
        fail(s, "a non-flush step wrote the checkpoint of slot " + std::to_string(sl));
      }
      if (std::memcmp(st.raw() + size_t(sl) * rb, twin_[0].raw() + size_t(sl) * rb, rb) != 0)
        fail(s, "checkpoint depends on rejected drafts (twin differs)");
    }
    check_cursors(s);
    check_untouched(s);

    prev_pending_ = !commit_all;
    prev_acc_ = acc;
    if (!prev_pending_ && (s % 4 == 3)) check_materialize(s);
  }

  void finish() {
    if (prev_pending_) {
      Buf num_acc(DType::i32, {ROWS}, where_);
      for (int64_t b = 0; b < ROWS; ++b) num_acc.set(b, double(prev_acc_[size_t(b)]));
      num_acc.upload();
      fc_.commit(args(main_, false), slot_.t(), PAD, num_acc.t(), ex_);
      fc_.commit(args(twin_, false), slot_.t(), PAD, num_acc.t(), ex_);
      sync_status("verify: commit");
      for (int64_t b = 0; b < ROWS; ++b)
        if (slots_[size_t(b)] != PAD) ring_commit(cursors_[size_t(b)], int32_t(prev_acc_[size_t(b)]));
      download_all(main_);
      download_all(twin_);
      check_cursors(-2);
      prev_pending_ = false;
    }
    check_materialize(-2);
  }

  void check_materialize(int64_t s) {
    std::vector<int64_t> sh = {ROWS};
    for (int64_t d : fc_.state_inner()) sh.push_back(d);
    Buf m(DType::f32, sh, where_), mt(DType::f32, sh, where_);
    poison(m);
    poison(mt);
    std::vector<std::vector<uint8_t>> before;
    for (const Buf& b : main_) before.push_back(snapshot(b));
    fc_.materialize(args(main_, false), slot_.t(), PAD, m.t(), ex_);
    fc_.materialize(args(twin_, false), slot_.t(), PAD, mt.t(), ex_);
    sync_status("verify: materialize");
    m.download();
    mt.download();
    download_all(main_);
    for (size_t i = 0; i < main_.size(); ++i)
      if (std::memcmp(main_[i].raw(), before[i].data(), main_[i].bytes()) != 0) fail(s, "materialize wrote the pool");
    const int64_t re = m.numel() / ROWS;
    for (int64_t b = 0; b < ROWS; ++b) {
      const int64_t sl = slots_[size_t(b)];
      if (sl == PAD) continue;
      ErrAcc e;
      for (int64_t i = 0; i < re; ++i) e.add(m.get(b * re + i), base_.get(sl * re + i));
      res_.mat = std::max(res_.mat, e.value());
      if (!(e.value() <= tol_)) fail(s, "materialized state rel err " + fmt(e.value()));
      if (std::memcmp(m.raw() + size_t(b * re) * 4, mt.raw() + size_t(b * re) * 4, size_t(re) * 4) != 0)
        fail(s, "materialized state depends on rejected drafts (twin differs)");
    }
  }

  void check_cursors(int64_t s) {
    const Buf& cur = main_.back();
    for (int64_t b = 0; b < ROWS; ++b) {
      const int64_t sl = slots_[size_t(b)];
      if (sl == PAD) continue;
      const int32_t* c = cur.as<int32_t>() + sl * CURSOR_FIELDS;
      const RingCursor& w = cursors_[size_t(b)];
      if (c[0] != w.start || c[1] != w.count || c[2] != w.pending)
        fail(s, "cursor of slot " + std::to_string(sl) + " is {" + std::to_string(c[0]) + "," +
                    std::to_string(c[1]) + "," + std::to_string(c[2]) + "}, expected {" +
                    std::to_string(w.start) + "," + std::to_string(w.count) + "," + std::to_string(w.pending) + "}");
      if (std::memcmp(c, twin_.back().as<int32_t>() + sl * CURSOR_FIELDS, CURSOR_FIELDS * 4) != 0)
        fail(s, "twin cursor differs");
    }
  }

  void check_untouched(int64_t s) {
    for (int64_t sl = 0; sl < SLOTS; ++sl) {
      if (std::find(slots_.begin(), slots_.end(), sl) != slots_.end()) continue;
      for (size_t i = 0; i < main_.size(); ++i) {
        const size_t rb = row_bytes(main_[i]);
        if (std::memcmp(main_[i].raw() + size_t(sl) * rb, initial_[i].data() + size_t(sl) * rb, rb) != 0) {
          fail(s, "slot " + std::to_string(sl) + " (pad / unused) was written");
          return;
        }
      }
    }
  }

  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2e", v);
    return b;
  }

  FamilyCase& fc_;
  Options o_;
  int64_t L_, T_max_, R_ = 0;
  double tol_;
  std::mt19937_64 rng_;
  Device where_ = Device::cpu;
  Exec ex_, ref_;
  Buf status_, slot_, base_;
  std::vector<int64_t> slots_, prev_acc_;
  bool prev_pending_ = false;
  std::vector<Buf> main_, twin_;
  std::vector<std::vector<uint8_t>> initial_;
  std::vector<RingCursor> cursors_;
  Result res_;
};

// Shapes verified per family: every preset of the family at TP = 1 and the
// headline preset at TP = 8 (G = 1 for Mamba-2); --quick: the headline
// preset at TP = 8 only.
std::vector<Preset> shapes_for(Family f, bool quick) {
  std::vector<Preset> out;
  for (const Preset& p : PRESETS) {
    if (p.family != f) continue;
    Preset tp8;
    if (p.main && tp_shard(p, 8, tp8)) out.push_back(tp8);
    if (!quick) out.push_back(p);
  }
  return out;
}

// Dual-precision checks of family f on the headline preset at TP = 8; one
// PASS/FAIL line.
bool verify_dual_family(Family f, const Options& o) {
  const double t0 = now_seconds();
  const std::vector<Preset> list = shapes_for(f, true);
  DualResult r;
  std::string shape = "-";
  int64_t L = o.L;
  try {
    if (list.empty()) throw std::runtime_error("no shape");
    shape = shape_str(list[0]);
    if (L == 0) L = list[0].L;
    const uint64_t seed = o.seed * 1000003u + 104729u + uint64_t(f);
    auto fc = make_case(list[0], o.act, device_of(o.backend), seed);
    r = verify_dual(*fc, o.backend, o.state, o.act, L, o.steps, seed);
  } catch (const std::exception& e) {
    r.failure_count = 1;
    r.failures = {std::string("exception: ") + e.what()};
  }
  const bool ok = r.failure_count == 0;
  std::printf("%s %-6s dual backend=%s shape=%s formats=bf16,f16,fp8,nvfp4 steps=%lld L=%lld  "
              "ckpt identical across formats (%lld), non-flush rows keep ckpt+copy (%lld), "
              "copy == quant_pack(ckpt) (%lld)  flushes=%lld  %.1fs\n",
              ok ? "PASS" : "FAIL", family_name(f), backend_name(o.backend), shape.c_str(),
              (long long)o.steps, (long long)L, (long long)r.ckpt_checks, (long long)r.keep_checks,
              (long long)r.copy_checks, (long long)r.flushes, now_seconds() - t0);
  for (const std::string& m : r.failures) std::printf("      %s\n", m.c_str());
  if (r.failure_count > int64_t(r.failures.size()))
    std::printf("      ... %lld failures in all\n", (long long)r.failure_count);
  std::fflush(stdout);
  return ok;
}

}  // namespace

const char* VERIFY_USAGE =
    "usage: replayssm verify [--backend reference|cpu|cuda] [--family mamba2|gdn|kda|all]\n"
    "                        [--steps N] [--L N] [--quick] [--state fp32|fp16|bf16]\n"
    "                        [--act fp32|fp16|bf16] [--seed N] [--no-dual] [--verbose]\n"
    "\n"
    "Checks the invariants of design/replay.md §5 on one backend at the model\n"
    "shapes of §6 (3 rows + 1 pad row, random ring starts, plain and speculative\n"
    "steps with random acceptances) against the standard recurrence computed by\n"
    "the reference backend. Prints one PASS/FAIL line per family; exits 1 on any\n"
    "failure. A second line per family checks\n"
    "dual-precision pools (one per read format bf16, f16, fp8, nvfp4, same\n"
    "schedule, headline shape at TP = 8): checkpoints identical across formats,\n"
    "non-flushing steps leave checkpoint and read copy unchanged, the copy equals\n"
    "quant_pack of the checkpoint (cuda: pools on the device, fetched per check).\n"
    "\n"
    "  --backend   backend under test (default cpu)\n"
    "  --family    family to check (default all)\n"
    "  --steps     replay steps per shape (default 40; --quick: 16)\n"
    "  --L         history capacity (default the preset's, 16; --quick: 8)\n"
    "  --quick     one shape per family (the headline preset at TP = 8)\n"
    "  --state     checkpoint dtype (default fp32)\n"
    "  --act       activation dtype of inputs and outputs (default fp32)\n"
    "  --seed      random seed (default 1)\n"
    "  --no-dual   skip the dual-precision checks\n"
    "  --verbose   one line per shape and the first failures of each\n";

int verify_main(int argc, char** argv) {
  Args a(argc, argv, 1, {"--quick", "--verbose", "--no-dual"});
  a.only({"--backend", "--family", "--steps", "--L", "--quick", "--state", "--act", "--seed", "--verbose",
          "--no-dual"});
  Options o;
  o.backend = parse_backend(a.str("--backend", "cpu"));
  o.family = a.str("--family", "all");
  o.quick = a.has("--quick");
  o.verbose = a.has("--verbose");
  o.dual = !a.has("--no-dual");
  o.steps = a.integer("--steps", o.quick ? 16 : 40);
  o.L = a.integer("--L", o.quick ? 8 : 0);
  o.state = parse_dtype(a.str("--state", "fp32"), "--state");
  o.act = parse_dtype(a.str("--act", "fp32"), "--act");
  o.seed = uint64_t(a.integer("--seed", 1));
  if (o.steps < 1) throw UsageError("--steps must be >= 1");
  if (o.L < 0 || o.L == 1) throw UsageError("--L must be >= 2");
  std::vector<Family> fams;
  if (o.family == "all") {
    fams = {Family::mamba2, Family::gdn, Family::kda};
  } else {
    Family f;
    if (!parse_family(o.family, f)) throw UsageError("--family expects mamba2, gdn, kda or all");
    fams = {f};
  }
  if (o.backend == Backend::cuda && !cuda_available()) {
    std::fprintf(stderr, "replayssm verify: the cuda backend is not available (no CUDA build or no GPU)\n");
    return 2;
  }

  const double tol = tolerance(limiting(o.state, o.act));
  bool all_ok = true;
  for (Family f : fams) {
    Result agg;
    int64_t shapes = 0;
    std::string error;
    const double t0 = now_seconds();
    const std::vector<Preset> list = shapes_for(f, o.quick);
    Progress prog(std::string("verify ") + family_name(f), int64_t(list.size()), "shapes");
    for (const Preset& p : list) {
      prog.tick(shapes);
      const int64_t L = o.L ? o.L : p.L;
      const uint64_t seed = o.seed * 1000003u + uint64_t(shapes) * 7919u + uint64_t(f);
      Result r;
      try {
        auto fc = make_case(p, o.act, device_of(o.backend), seed);
        Runner run(*fc, o, L, tol, seed);
        r = run.run(o.steps);
      } catch (const std::exception& e) {
        r.failure_count = 1;
        r.failures = {std::string("exception: ") + e.what()};
      }
      ++shapes;
      if (o.verbose || r.failure_count) {
        prog.done();
        std::printf("  %-6s %-22s %s  out %.1e  ckpt %.1e  mat %.1e  prefill %.1e  flushes %lld\n",
                    family_name(f), shape_str(p).c_str(), r.failure_count ? "FAIL" : "ok", r.out, r.ckpt,
                    r.mat, r.prefill, (long long)r.flushes);
        for (const std::string& m : r.failures) std::printf("      %s\n", m.c_str());
        if (r.failure_count > int64_t(r.failures.size()))
          std::printf("      ... %lld failures in all\n", (long long)r.failure_count);
      }
      agg.out = std::max(agg.out, r.out);
      agg.ckpt = std::max(agg.ckpt, r.ckpt);
      agg.mat = std::max(agg.mat, r.mat);
      agg.prefill = std::max(agg.prefill, r.prefill);
      agg.flushes += r.flushes;
      agg.spec_steps += r.spec_steps;
      agg.failure_count += r.failure_count;
    }
    prog.done();
    const bool ok = agg.failure_count == 0;
    all_ok = all_ok && ok;
    std::printf("%s %-6s backend=%s shapes=%lld steps=%lld L=%lld  max rel err: out %.1e ckpt %.1e "
                "materialize %.1e prefill %.1e (tol %.0e)  flushes=%lld spec_steps=%lld  %.1fs\n",
                ok ? "PASS" : "FAIL", family_name(f), backend_name(o.backend), (long long)shapes,
                (long long)o.steps, (long long)(o.L ? o.L : 16), agg.out, agg.ckpt, agg.mat, agg.prefill, tol,
                (long long)agg.flushes, (long long)agg.spec_steps, now_seconds() - t0);
    std::fflush(stdout);
    if (o.dual) all_ok = verify_dual_family(f, o) && all_ok;
  }
  return all_ok ? 0 : 1;
}

}  // namespace replayssm::tools

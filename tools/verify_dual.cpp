// `replayssm verify`, dual-precision checks (docs/dual_precision.md, design
// §4 and §5.5) on any backend (cuda: the pools live on the device and are
// fetched for every check). One pool per read format (bf16, f16,
// fp8, nvfp4), all given the same prompts and the same random schedule of
// plain (T = 1, commit_all) and speculative steps (T ∈ {2, 5, 8}, random
// accepted counts committed by the next step) on 3 live rows + 1 pad row of
// a 7-slot pool with random ring starts. Checked after prefill and every step:
//   ckpt    checkpoint and cursor bytes are identical across the formats
//   keep    a row that does not flush keeps its checkpoint and read-copy bytes
//   copy    the read copy of every live slot equals quant_pack(format,
//           checkpoint) (rewritten by prefill and every flush)
//   pad     slots no live row uses keep zero checkpoint and copy bytes
#include <algorithm>
#include <cstring>
#include <random>

#include "common.h"
#include "core/ring.h"
#include "verify_case.h"

namespace replayssm::tools {
namespace {

constexpr int64_t ROWS = 4, SLOTS = 7, PAD = -1;
constexpr ReadFormat FORMATS[] = {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3,
                                  ReadFormat::nvfp4};
constexpr int NF = int(sizeof(FORMATS) / sizeof(FORMATS[0]));

struct DualPool {
  ReadFormat format;
  std::vector<Buf> t;     // state, rings, cursor
  Buf copy;               // [S, heads, tile_bytes] u8
  std::vector<Buf> dual;  // dual_rings()
};

class DualRunner {
 public:
  DualRunner(FamilyCase& fc, Backend backend, DType state, DType act, int64_t L, uint64_t seed)
      : fc_(fc), state_(state), act_(act), L_(L), T_max_(std::min<int64_t>(8, L)), rng_(seed) {
    ex_.backend = backend;
    where_ = device_of(backend);
    R_ = fc.ring_length(L_, T_max_);
    const std::vector<int64_t> in = fc.state_inner();
    heads_ = in[0];
    tile_r_ = in[1];
    tile_k_ = in[2];
  }

  DualResult run(int64_t steps) {
    setup();
    prefill();
    for (int64_t s = 0; s < steps; ++s) step(s);
    return res_;
  }

 private:
  void fail(int64_t step, const std::string& msg) {
    ++res_.failure_count;
    if (res_.failures.size() < 8) res_.failures.push_back("step " + std::to_string(step) + ": " + msg);
  }

  PoolArgs args(const DualPool& p) const {
    PoolArgs a;
    a.L = L_;
    for (const Buf& b : p.t) a.t.push_back(b.t());
    a.read_copy = p.copy.t();
    a.read_format = p.format;
    for (const Buf& b : p.dual) a.dual.push_back(b.t());
    return a;
  }

  std::vector<Buf> make_inputs(const std::vector<int64_t>& lead) {
    std::vector<Buf> in;
    for (const InputSpec& s : fc_.inputs()) {
      std::vector<int64_t> sh = lead;
      sh.insert(sh.end(), s.inner.begin(), s.inner.end());
      in.emplace_back(s.dtype, sh, where_);
      std::normal_distribution<double> nd(s.a, s.b);
      std::uniform_real_distribution<double> ud(s.a, s.b);
      for (int64_t i = 0; i < in.back().numel(); ++i) in.back().set(i, s.normal ? nd(rng_) : ud(rng_));
      in.back().upload();
    }
    return in;
  }
  static std::vector<Tensor> views(const std::vector<Buf>& v) {
    std::vector<Tensor> t;
    for (const Buf& b : v) t.push_back(b.t());
    return t;
  }
  Buf make_out(std::vector<int64_t> lead) const {
    for (int64_t d : fc_.out_inner()) lead.push_back(d);
    return Buf(act_, lead, where_);
  }
  // Pool buffers to the device after setup, back to the host before a check
  // (no-ops on the host backends).
  void upload_pools() const {
    for (const DualPool& p : pools_) {
      for (const Buf& b : p.t) b.upload();
      p.copy.upload();
      for (const Buf& b : p.dual) b.upload();
    }
  }
  void download_pools() const {
    for (const DualPool& p : pools_) {
      for (const Buf& b : p.t) b.download();
      p.copy.download();
    }
  }
  static size_t row_bytes(const Buf& b) { return b.bytes() / size_t(SLOTS); }
  static std::vector<uint8_t> snapshot(const Buf& b) { return std::vector<uint8_t>(b.raw(), b.raw() + b.bytes()); }

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
    std::vector<int32_t> starts(SLOTS);
    for (int32_t& s : starts) s = int32_t(rng_() % uint64_t(R_));
    for (ReadFormat f : FORMATS) {
      DualPool p;
      p.format = f;
      std::vector<int64_t> sh = {SLOTS};
      for (int64_t d : fc_.state_inner()) sh.push_back(d);
      p.t.emplace_back(state_, sh, where_);
      for (const RingSpec& r : fc_.rings()) {
        std::vector<int64_t> rs = {SLOTS, R_};
        rs.insert(rs.end(), r.inner.begin(), r.inner.end());
        p.t.emplace_back(r.dtype, rs, where_);
      }
      p.t.emplace_back(DType::i32, std::vector<int64_t>{SLOTS, CURSOR_FIELDS}, where_);
      for (int64_t s = 0; s < SLOTS; ++s) p.t.back().as<int32_t>()[s * CURSOR_FIELDS] = starts[size_t(s)];
      p.copy = Buf(DType::u8, {SLOTS, heads_, fc_.tile_bytes(f)}, where_);
      for (const RingSpec& r : fc_.dual_rings()) {
        std::vector<int64_t> rs = {SLOTS, R_};
        rs.insert(rs.end(), r.inner.begin(), r.inner.end());
        p.dual.emplace_back(r.dtype, rs, where_);
      }
      pools_.push_back(std::move(p));
    }
    slot_.upload();
    upload_pools();
    cursors_.assign(ROWS, RingCursor{0, 0, 0});
    for (int64_t b = 0; b < ROWS; ++b)
      if (slots_[size_t(b)] != PAD) cursors_[size_t(b)].start = starts[size_t(slots_[size_t(b)])];
  }

  void prefill() {
    std::vector<int64_t> cu = {0};
    for (int64_t b = 0; b < ROWS; ++b) cu.push_back(cu.back() + 1 + int64_t(rng_() % 6));
    Buf cu_t(DType::i32, {ROWS + 1}, where_);
    for (int64_t b = 0; b <= ROWS; ++b) cu_t.set(b, double(cu[size_t(b)]));
    cu_t.upload();
    std::vector<Buf> in = make_inputs({cu.back()});
    for (DualPool& p : pools_) {
      Buf out = make_out({cu.back()});
      fc_.prefill({views(in), out.t(), slot_.t(), PAD}, cu_t.t(), args(p), ex_);
    }
    download_pools();
    check(-1, std::vector<bool>(ROWS, true), {}, {});
  }

  void step(int64_t s) {
    const bool spec = rng_() % 2 == 1;
    const int64_t choices[3] = {2, 5, 8};
    int64_t T = spec ? std::min(choices[rng_() % 3], T_max_) : 1;
    if (T < 2) T = 1;
    std::vector<int64_t> acc(ROWS, T);
    if (T > 1)
      for (int64_t& a : acc) a = 1 + int64_t(rng_() % uint64_t(T));
    const bool commit_all = T == 1;

    const std::vector<bool> flush =
        mirror_replay_step(cursors_, slots_, PAD, prev_acc_, T, L_, R_, commit_all, &res_.flushes);

    std::vector<std::vector<uint8_t>> st_before, copy_before;
    for (const DualPool& p : pools_) {
      st_before.push_back(snapshot(p.t[0]));
      copy_before.push_back(snapshot(p.copy));
    }
    Buf num_acc(DType::i32, {ROWS}, where_);
    for (int64_t b = 0; b < ROWS; ++b) num_acc.set(b, double(prev_acc_.empty() ? 1 : prev_acc_[size_t(b)]));
    num_acc.upload();
    const Tensor acc_t = prev_pending_ ? num_acc.t() : Tensor{};
    std::vector<Buf> in = make_inputs({ROWS, T});
    for (DualPool& p : pools_) {
      Buf y = make_out({ROWS, T});
      fc_.replay_step({views(in), y.t(), slot_.t(), PAD}, args(p), acc_t, commit_all, ex_);
    }
    download_pools();
    check(s, flush, st_before, copy_before);
    prev_pending_ = !commit_all;
    prev_acc_ = acc;
  }

  // Packs the checkpoint of slot `sl` ([heads, R, K]) in the pool's format
  // with the fast CPU path (bytes identical to the reference oracle's).
  Buf pack(const DualPool& p, int64_t sl) const {
    Buf out(DType::u8, {heads_, fc_.tile_bytes(p.format)});
    Tensor in = p.t[0].host();
    in.data = p.t[0].raw() + size_t(sl) * row_bytes(p.t[0]);
    in.ndim = 3;
    in.shape[0] = heads_;
    in.shape[1] = tile_r_;
    in.shape[2] = tile_k_;
    in.stride[2] = 1;
    in.stride[1] = tile_k_;
    in.stride[0] = tile_r_ * tile_k_;
    Exec cpu;
    cpu.backend = Backend::cpu;
    quant_pack(p.format, in, out.host(), cpu);
    return out;
  }

  void check(int64_t s, const std::vector<bool>& flush,
             const std::vector<std::vector<uint8_t>>& st_before,
             const std::vector<std::vector<uint8_t>>& copy_before) {
    const DualPool& p0 = pools_[0];
    for (int i = 1; i < NF; ++i) {
      const DualPool& p = pools_[size_t(i)];
      ++res_.ckpt_checks;
      if (std::memcmp(p.t[0].raw(), p0.t[0].raw(), p0.t[0].bytes()) != 0)
        fail(s, std::string("checkpoint differs between read formats bf16 and ") + read_format_name(p.format));
      if (std::memcmp(p.t.back().raw(), p0.t.back().raw(), p0.t.back().bytes()) != 0)
        fail(s, std::string("cursors differ between read formats bf16 and ") + read_format_name(p.format));
    }
    for (size_t i = 0; i < pools_.size(); ++i) {
      const DualPool& p = pools_[i];
      const size_t rb = row_bytes(p.t[0]), cb = row_bytes(p.copy);
      for (int64_t sl = 0; sl < SLOTS; ++sl) {  // slots no live row uses stay zero
        if (std::find(slots_.begin(), slots_.end(), sl) != slots_.end()) continue;
        const uint8_t* st = p.t[0].raw() + size_t(sl) * rb;
        const uint8_t* cp = p.copy.raw() + size_t(sl) * cb;
        if (std::any_of(st, st + rb, [](uint8_t v) { return v != 0; }) ||
            std::any_of(cp, cp + cb, [](uint8_t v) { return v != 0; }))
          fail(s, std::string(read_format_name(p.format)) + ": unused slot " + std::to_string(sl) +
                      " was written");
      }
      for (int64_t b = 0; b < ROWS; ++b) {
        const int64_t sl = slots_[size_t(b)];
        if (sl == PAD) continue;
        if (!st_before.empty() && !flush[size_t(b)]) {
          ++res_.keep_checks;
          if (std::memcmp(p.t[0].raw() + size_t(sl) * rb, st_before[i].data() + size_t(sl) * rb, rb) != 0)
            fail(s, std::string(read_format_name(p.format)) + ": a non-flush step wrote the checkpoint of slot " +
                        std::to_string(sl));
          if (std::memcmp(p.copy.raw() + size_t(sl) * cb, copy_before[i].data() + size_t(sl) * cb, cb) != 0)
            fail(s, std::string(read_format_name(p.format)) + ": a non-flush step wrote the read copy of slot " +
                        std::to_string(sl));
        }
        ++res_.copy_checks;
        const Buf packed = pack(p, sl);
        if (std::memcmp(p.copy.raw() + size_t(sl) * cb, packed.raw(), cb) != 0)
          fail(s, std::string(read_format_name(p.format)) + ": read copy of slot " + std::to_string(sl) +
                      " differs from quant_pack of its checkpoint");
      }
    }
  }

  FamilyCase& fc_;
  DType state_, act_;
  int64_t L_, T_max_, R_ = 0, heads_ = 0, tile_r_ = 0, tile_k_ = 0;
  std::mt19937_64 rng_;
  Exec ex_;
  Device where_ = Device::cpu;
  Buf slot_;
  std::vector<int64_t> slots_, prev_acc_;
  bool prev_pending_ = false;
  std::vector<DualPool> pools_;
  std::vector<RingCursor> cursors_;
  DualResult res_;
};

}  // namespace

DualResult verify_dual(FamilyCase& fc, Backend backend, DType state, DType act, int64_t L,
                       int64_t steps, uint64_t seed) {
  DualRunner r(fc, backend, state, act, L, seed);
  return r.run(steps);
}

}  // namespace replayssm::tools

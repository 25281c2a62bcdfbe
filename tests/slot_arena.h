// Pool tensors as strided views into one slot-major device allocation whose
// last slots lie past 2^31 elements: slot s of every tensor ("piece") sits in
// record s, records SB bytes apart, so a view's slot stride is SB / element
// size and slot s of a 4-byte piece starts at s·SB / 4 elements. With
// (S − 1)·SB >= 2^33 bytes the last slot of every piece (fp32, 16-bit, i32,
// u8) starts past element 2^31: an address computed in 32 bits anywhere on
// the slot's path misses it. Each piece's per-slot bytes are followed by a
// guard band of 0xA5 bytes, and the record starts with one, checked by
// expect_guards(); the bytes between records are never written by uploads.
// The arena's bytes are host memory (mmap, reserved lazily: only the
// records' pages are ever touched) or device memory (tests/gpu/gpu_util.h,
// cuda_arena_memory()).
#pragma once
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "test_util.h"

namespace replayssm::test {

// How an arena's bytes are reserved and reached.
struct ArenaMemory {
  Device device = Device::cpu;
  void* (*reserve)(size_t bytes) = nullptr;  // nullptr on failure
  void (*release)(void* p, size_t bytes) = nullptr;
  void (*write)(void* arena, const void* host, size_t bytes) = nullptr;
  void (*read)(void* host, const void* arena, size_t bytes) = nullptr;
};

inline ArenaMemory host_arena_memory() {
  ArenaMemory m;
  m.device = Device::cpu;
  m.reserve = [](size_t n) -> void* {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  };
  m.release = [](void* p, size_t n) { munmap(p, n); };
  m.write = [](void* a, const void* h, size_t n) { std::memcpy(a, h, n); };
  m.read = [](void* h, const void* a, size_t n) { std::memcpy(h, a, n); };
  return m;
}

class SlotArena {
 public:
  static constexpr size_t GUARD = 256;        // bytes of 0xA5 before and after every piece
  static constexpr size_t RECORD_ALIGN = 4096;
  static constexpr uint64_t PAST = uint64_t(1) << 33;  // (S − 1)·SB at least this

  SlotArena(int64_t S, ArenaMemory mem) : S_(S), mem_(mem) {}
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;
  ~SlotArena() { if (base_) mem_.release(base_, total_); }

  // A piece of `inner` shape per slot (the view is [S, inner...]); returns its
  // index. All pieces are added before allocate().
  int add(DType dt, const std::vector<int64_t>& inner) {
    Piece p;
    p.dt = dt;
    p.inner = inner;
    p.bytes = dtype_size(dt);
    for (int64_t e : inner) p.bytes *= size_t(e);
    p.off = record_;
    record_ = round_up(p.off + p.bytes + GUARD, GUARD);
    pieces_.push_back(p);
    return int(pieces_.size()) - 1;
  }

  // Reserves (S − 1)·SB + one record and writes the guard bands of every
  // record.
  void allocate() {
    const uint64_t need = S_ > 1 ? (PAST + uint64_t(S_ - 2)) / uint64_t(S_ - 1) : 0;
    sb_ = round_up(std::max<uint64_t>(need, record_ + GUARD), RECORD_ALIGN);
    total_ = size_t(S_ - 1) * sb_ + record_ + GUARD;
    base_ = static_cast<uint8_t*>(mem_.reserve(total_));
    if (!base_) throw std::runtime_error("SlotArena: cannot reserve " + std::to_string(total_) + " bytes");
    std::vector<uint8_t> band(GUARD, 0xA5);
    for (int64_t s = 0; s < S_; ++s)
      for (size_t i = 0; i <= pieces_.size(); ++i) {
        const size_t at = i == 0 ? 0 : pieces_[i - 1].off + GUARD + pieces_[i - 1].bytes;
        mem_.write(rec(s) + at, band.data(), GUARD);
      }
  }

  size_t slot_stride_bytes() const { return sb_; }

  // The device view [S, inner...] of piece i: slot stride SB / element size,
  // the inner dimensions contiguous.
  Tensor view(int i) const {
    const Piece& p = pieces_[size_t(i)];
    Tensor t;
    t.data = base_ + GUARD + p.off;
    t.dtype = p.dt;
    t.device = mem_.device;
    t.ndim = 1 + int(p.inner.size());
    t.shape[0] = S_;
    t.stride[0] = int64_t(sb_ / dtype_size(p.dt));
    int64_t st = 1;
    for (int d = t.ndim - 1; d >= 1; --d) {
      t.shape[d] = p.inner[size_t(d - 1)];
      t.stride[d] = st;
      st *= t.shape[d];
    }
    return t;
  }
  // Copies a dense [S, inner...] host tensor into piece i, slot by slot.
  void upload(int i, const HostTensor& dense) const {
    const Piece& p = pieces_[size_t(i)];
    expect_dense(p, dense);
    for (int64_t s = 0; s < S_; ++s)
      mem_.write(rec(s) + GUARD + p.off, dense.as<uint8_t>() + size_t(s) * p.bytes, p.bytes);
  }
  // Piece i as a dense host tensor.
  HostTensor download(int i) const {
    const Piece& p = pieces_[size_t(i)];
    std::vector<int64_t> shape{S_};
    shape.insert(shape.end(), p.inner.begin(), p.inner.end());
    HostTensor h(p.dt, shape);
    for (int64_t s = 0; s < S_; ++s)
      mem_.read(h.as<uint8_t>() + size_t(s) * p.bytes, rec(s) + GUARD + p.off, p.bytes);
    return h;
  }
  // Every guard band of every record still 0xA5.
  void expect_guards(const std::string& what) const {
    std::vector<uint8_t> band(GUARD);
    for (int64_t s = 0; s < S_; ++s)
      for (size_t i = 0; i <= pieces_.size(); ++i) {
        const size_t at = i == 0 ? 0 : pieces_[i - 1].off + GUARD + pieces_[i - 1].bytes;
        mem_.read(band.data(), rec(s) + at, GUARD);
        for (uint8_t b : band)
          if (b != 0xA5) {
            ADD_FAILURE() << what << ": guard band " << i << " of slot " << s << " overwritten";
            return;
          }
      }
  }

 private:
  struct Piece {
    DType dt;
    std::vector<int64_t> inner;
    size_t bytes = 0, off = 0;  // per slot; offset after the record's first guard
  };
  static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
  uint8_t* rec(int64_t s) const { return base_ + size_t(s) * sb_; }
  void expect_dense(const Piece& p, const HostTensor& dense) const {
    if (dense.t().dtype != p.dt || dense.bytes() != size_t(S_) * p.bytes || !dense.t().is_contiguous())
      throw std::logic_error("SlotArena::upload: the host tensor is not the piece's dense [S, ...] shape");
  }

  int64_t S_;
  ArenaMemory mem_;
  std::vector<Piece> pieces_;
  size_t record_ = 0;  // bytes of a record's pieces and their guards (after the first guard)
  uint64_t sb_ = 0;
  size_t total_ = 0;
  uint8_t* base_ = nullptr;
};

}  // namespace replayssm::test

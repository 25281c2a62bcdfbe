// Pool tensors as strided views into one slot-major allocation whose last
// slots lie past 2^31 elements: slot s of every tensor ("piece") sits in
// record s, records SB bytes apart, so a view's slot stride is SB / element
// size and slot s of a 4-byte piece starts at s·SB / 4 elements. With
// (S − 1)·SB >= 2^33 bytes the last slot of every piece (fp32, 16-bit, i32,
// u8) starts past element 2^31: an address computed in 32 bits anywhere on
// the slot's path misses it. A piece's rows (its last dimension) may be
// padded by a number of bytes, which makes every stride but the last one
// larger than dense. Every byte of a record that is not a piece's data (the
// guard bands before and after each piece, the row padding) holds 0xA5 and
// is checked by expect_guards(); the bytes between records are never
// written by uploads. The arena's bytes are host memory (mmap, reserved
// lazily: only the records' pages are touched) or device memory
// (tests/gpu/gpu_util.h, cuda_arena_memory()).
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

// How an arena's bytes are reserved and reached. write2d / read2d copy
// `rows` runs of `width` bytes, `pitch` bytes apart on the arena's side and
// contiguous on the host's.
struct ArenaMemory {
  Device device = Device::cpu;
  void* (*reserve)(size_t bytes) = nullptr;  // nullptr on failure
  void (*release)(void* p, size_t bytes) = nullptr;
  void (*fill)(void* arena, int byte, size_t bytes) = nullptr;
  void (*write2d)(void* arena, size_t pitch, const void* host, size_t width, size_t rows) = nullptr;
  void (*read2d)(void* host, const void* arena, size_t pitch, size_t width, size_t rows) = nullptr;
};

inline ArenaMemory host_arena_memory() {
  ArenaMemory m;
  m.device = Device::cpu;
  m.reserve = [](size_t n) -> void* {
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  };
  m.release = [](void* p, size_t n) { munmap(p, n); };
  m.fill = [](void* a, int byte, size_t n) { std::memset(a, byte, n); };
  m.write2d = [](void* a, size_t pitch, const void* h, size_t width, size_t rows) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(a) + r * pitch, static_cast<const uint8_t*>(h) + r * width, width);
  };
  m.read2d = [](void* h, const void* a, size_t pitch, size_t width, size_t rows) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(h) + r * width, static_cast<const uint8_t*>(a) + r * pitch, width);
  };
  return m;
}

class SlotArena {
 public:
  static constexpr size_t GUARD = 256;  // bytes of 0xA5 before and after every piece
  static constexpr uint8_t FILL = 0xA5;
  static constexpr size_t RECORD_ALIGN = 4096;
  static constexpr uint64_t PAST = uint64_t(1) << 33;  // (S − 1)·SB at least this

  SlotArena(int64_t S, ArenaMemory mem) : S_(S), mem_(mem) {}
  SlotArena(const SlotArena&) = delete;
  SlotArena& operator=(const SlotArena&) = delete;
  ~SlotArena() { if (base_) mem_.release(base_, total_); }

  // A piece of `inner` shape per slot (the view is [S, inner...]), its rows
  // (the last dimension) followed by row_pad bytes (a multiple of the
  // element size); returns its index. All pieces are added before allocate().
  int add(DType dt, const std::vector<int64_t>& inner, size_t row_pad = 0) {
    Piece p;
    p.dt = dt;
    p.inner = inner;
    const size_t e = dtype_size(dt);
    if (row_pad % e != 0) throw std::logic_error("SlotArena::add: row_pad is not a multiple of the element size");
    p.width = e * size_t(inner.empty() ? 1 : inner.back());
    p.pitch = p.width + (inner.empty() ? 0 : row_pad);
    p.rows = 1;
    for (size_t i = 0; i + 1 < inner.size(); ++i) p.rows *= size_t(inner[i]);
    p.off = record_;
    record_ = round_up(p.off + p.rows * p.pitch + GUARD, GUARD);
    pieces_.push_back(p);
    return int(pieces_.size()) - 1;
  }

  // Reserves (S − 1)·SB + one record and fills every record with 0xA5.
  void allocate() {
    const uint64_t need = S_ > 1 ? (PAST + uint64_t(S_ - 2)) / uint64_t(S_ - 1) : 0;
    sb_ = round_up(std::max<uint64_t>(need, record_ + GUARD), RECORD_ALIGN);
    total_ = size_t(S_ - 1) * sb_ + record_ + GUARD;
    base_ = static_cast<uint8_t*>(mem_.reserve(total_));
    if (!base_) throw std::runtime_error("SlotArena: cannot reserve " + std::to_string(total_) + " bytes");
    for (int64_t s = 0; s < S_; ++s) mem_.fill(rec(s), FILL, record_ + GUARD);
  }

  size_t slot_stride_bytes() const { return sb_; }

  // The view [S, inner...] of piece i: slot stride SB / element size, rows
  // pitch / element size apart, the last dimension contiguous.
  Tensor view(int i) const {
    const Piece& p = pieces_[size_t(i)];
    const int64_t e = int64_t(dtype_size(p.dt));
    Tensor t;
    t.data = base_ + GUARD + p.off;
    t.dtype = p.dt;
    t.device = mem_.device;
    t.ndim = 1 + int(p.inner.size());
    t.shape[0] = S_;
    t.stride[0] = int64_t(sb_) / e;
    int64_t st = 1;
    for (int d = t.ndim - 1; d >= 1; --d) {
      t.shape[d] = p.inner[size_t(d - 1)];
      t.stride[d] = st;
      st *= d == t.ndim - 1 ? int64_t(p.pitch) / e : t.shape[d];
    }
    return t;
  }
  // Copies a dense [S, inner...] host tensor into piece i, slot by slot.
  void upload(int i, const HostTensor& dense) const {
    const Piece& p = pieces_[size_t(i)];
    expect_dense(p, dense);
    for (int64_t s = 0; s < S_; ++s)
      mem_.write2d(data(p, s), p.pitch, dense.as<uint8_t>() + size_t(s) * p.rows * p.width, p.width, p.rows);
  }
  // Piece i as a dense host tensor.
  HostTensor download(int i) const {
    const Piece& p = pieces_[size_t(i)];
    std::vector<int64_t> shape{S_};
    shape.insert(shape.end(), p.inner.begin(), p.inner.end());
    HostTensor h(p.dt, shape);
    for (int64_t s = 0; s < S_; ++s)
      mem_.read2d(h.as<uint8_t>() + size_t(s) * p.rows * p.width, data(p, s), p.pitch, p.width, p.rows);
    return h;
  }
  // Every byte of every record that is not a piece's data still 0xA5.
  void expect_guards(const std::string& what) const {
    std::vector<uint8_t> r(record_ + GUARD);
    for (int64_t s = 0; s < S_; ++s) {
      mem_.read2d(r.data(), rec(s), r.size(), r.size(), 1);
      size_t at = 0;  // the next byte that must hold FILL
      auto band = [&](size_t end, size_t piece, const char* where) {
        for (; at < end; ++at)
          if (r[at] != FILL) {
            ADD_FAILURE() << what << ": slot " << s << ", " << where << " of piece " << piece << " overwritten";
            return false;
          }
        return true;
      };
      for (size_t i = 0; i < pieces_.size(); ++i) {
        const Piece& p = pieces_[i];
        if (!band(GUARD + p.off, i, "the guard before")) return;
        for (size_t row = 0; row < p.rows; ++row) {
          at = GUARD + p.off + row * p.pitch + p.width;
          if (!band(GUARD + p.off + (row + 1) * p.pitch, i, "the row padding")) return;
        }
        at = GUARD + p.off + p.rows * p.pitch;
      }
      if (!band(r.size(), pieces_.size(), "the guard after")) return;
    }
  }

 private:
  struct Piece {
    DType dt;
    std::vector<int64_t> inner;
    size_t width = 0, pitch = 0, rows = 0;  // bytes of a row's data, bytes between rows, rows per slot
    size_t off = 0;                         // offset after the record's first guard
  };
  static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
  uint8_t* rec(int64_t s) const { return base_ + size_t(s) * sb_; }
  uint8_t* data(const Piece& p, int64_t s) const { return rec(s) + GUARD + p.off; }
  void expect_dense(const Piece& p, const HostTensor& dense) const {
    if (dense.t().dtype != p.dt || dense.bytes() != size_t(S_) * p.rows * p.width || !dense.t().is_contiguous())
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

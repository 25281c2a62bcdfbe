// Host helpers of the dual-precision and shared modes (src/*/dual.cpp):
// owning scratch tensors, row gather / scatter between a pool (leading dim =
// slot, any strides, unit inner stride) and a compact scratch pool (leading
// dim = batch row), read-copy validation and tile pack / unpack per backend.
//
// The dual and shared entry points run the validated single-precision entry
// points on compact scratch pools and write the caller's pool only after
// every call on the scratch has succeeded, so a rejected call writes nothing.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "replayssm/dual.h"
#include "replayssm/quant.h"
#include "replayssm/types.h"

namespace replayssm::dual {

// An owning, zero-filled, 64-byte aligned contiguous host tensor.
class Scratch {
 public:
  Scratch() = default;
  Scratch(DType dtype, const std::vector<int64_t>& shape) { reset(dtype, shape); }
  void reset(DType dtype, const std::vector<int64_t>& shape);
  const Tensor& t() const { return t_; }
  operator const Tensor&() const { return t_; }
  template <class T> T* as() const { return static_cast<T*>(t_.data); }

 private:
  struct Del { void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); } };
  std::unique_ptr<uint8_t, Del> mem_;
  Tensor t_;
};

// Shape of t with the leading dimension replaced by n.
std::vector<int64_t> with_lead(const Tensor& t, int64_t n);
// A compact scratch copy of rows idx[b] of t (row b left zero where idx[b] < 0).
Scratch gather(const Tensor& t, const std::vector<int64_t>& idx);
// dst[d] = src[s] (same trailing shape and dtype; unit inner strides).
void copy_row(const Tensor& src, int64_t s, const Tensor& dst, int64_t d);
// Pointer to element (i0, i1, ...) of t (missing trailing indices = 0).
uint8_t* element(const Tensor& t, std::initializer_list<int64_t> idx);

// Host slot vector as int64 (pad rows → −1) after check::slots (distinct).
std::vector<int64_t> checked_slots(const char* fn, const char* arg, const Tensor& slot,
                                   int64_t pad, int64_t S, int64_t n);
// Compact slot vector for the scratch pool: row b → b, pad rows → −1.
Scratch compact_slots(const std::vector<int64_t>& idx);

// Rejects the cuda backend (dual / shared modes are host-only) and anything
// but reference | cpu.
void require_host(const char* fn, const Exec& exec, const char* what);

// Validates a packed pool / read copy [S, heads, L.tile_bytes] u8 (unit inner
// stride, 16-byte aligned tiles) for the tile layout of `format`: a host
// tensor, or (exec given) on exec's device.
QuantLayout check_packed_pool(const char* fn, const char* arg, const Tensor& t, ReadFormat format,
                              int64_t S, int64_t heads, int64_t R, int64_t K,
                              const Exec* exec = nullptr);

// Tile codecs of the backend (reference: the oracle; cpu: the fast codec).
void pack_tile(Backend b, const QuantLayout& L, const float* x, uint8_t* tile);
void unpack_tile(Backend b, const QuantLayout& L, const uint8_t* tile, float* y);

// Element (h, r, k) of a state-like row src[s] ([.., heads, R, K], any float
// dtype) converted to f32 into y [R, K] contiguous.
void load_tile_f32(const Tensor& src, int64_t s, int64_t h, float* y);
// Store f32 y [R, K] into dst[s, h] (f32 | f16 | bf16, round to nearest even).
void store_tile(const Tensor& dst, int64_t s, int64_t h, const float* y);

// copy[slot] = pack(state[s]) for every (s, head): the read copy of a checkpoint.
void pack_rows(Backend b, const QuantLayout& L, const Tensor& state, int64_t s_state,
               const Tensor& copy, int64_t s_copy);
// out[s_out] (f32 [heads, R, K]) = unpack(copy[s_copy]).
void unpack_rows(Backend b, const QuantLayout& L, const Tensor& copy, int64_t s_copy,
                 const Tensor& out, int64_t s_out);

// Stochastic-rounding pack of one tile (x [R, K] contiguous): the scales of
// the round-to-nearest pack, then each code one of the two representable
// neighbours of x/scale, the upper with probability (x/scale − lo)/(hi − lo),
// drawn from a hash of (seed, tile_id, step, element). NaN / Inf and
// saturated values keep their round-to-nearest code.
void pack_tile_stochastic(const QuantLayout& L, const float* x, uint8_t* tile, uint64_t seed,
                          uint64_t tile_id, uint64_t step);

// Shared-mode decode on a packed pool: unpack rows idx of `packed` into an
// fp32 scratch pool [B, heads, R, K], run `decode(scratch, compact_slots)`
// (a validated single-precision decode), then re-encode the rows.
template <class Decode>
void shared_decode(const char* fn, const Tensor& packed, const QuantLayout& L,
                   const std::vector<int64_t>& idx, const QuantRounding& rounding,
                   const Exec& exec, Decode&& decode);

}  // namespace replayssm::dual

#include "core/dual_util_impl.h"

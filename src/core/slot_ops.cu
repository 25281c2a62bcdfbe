// Device slot operations over a pool's tensors (leading dim = slot): copy row
// src[i] to row dst[i], or zero row slot[i], for every tensor of the pool.
//
// Slot indices stay on the device (no host synchronisation). A slot outside
// [0, S) of a tensor ORs STATUS_BAD_SLOT into exec.device_status (when set)
// and its entry is skipped; pad entries are skipped silently. Entries of one
// call run concurrently: destination rows must be distinct and must not be
// sources of the same call.
#include <algorithm>

#include "core/check.h"
#include "core/slot_ops.h"
#include "cuda/common.cuh"

namespace replayssm::slot_ops {
namespace {

// One pool tensor as seen by the kernel, in units of U (a vector word when
// the row is contiguous, the element otherwise).
struct RowView {
  char* base;
  int64_t S;                 // slots (shape[0])
  int64_t slot_stride;       // units between slot rows
  int64_t units;             // units per row
  int ndim;                  // row dims (shape[1:]); unused on the contiguous path
  int64_t shape[MAX_DIMS];
  int64_t stride[MAX_DIMS];  // units
};

struct Indices {
  const void* src;  // null for zero
  DType src_dt;
  int64_t src_stride;
  const void* dst;
  DType dst_dt;
  int64_t dst_stride;
  int64_t n;
  int64_t pad;
  int32_t* status;
};

template <int BYTES> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint2; };
template <> struct Word<16> { using type = uint4; };

// Offset (units) of unit e of a row. CONTIG: the row is one dense run.
template <bool CONTIG>
__device__ __forceinline__ int64_t row_offset(const RowView& v, int64_t e) {
  if constexpr (CONTIG) {
    return e;
  } else {
    int64_t off = 0;
    for (int d = v.ndim - 1; d >= 0; --d) {
      const int64_t i = e % v.shape[d];
      e /= v.shape[d];
      off += i * v.stride[d];
    }
    return off;
  }
}

// grid.y walks the entries, grid.x the units of one row.
template <int BYTES, bool CONTIG, bool ZERO>
__global__ void slot_rows_kernel(RowView v, Indices ix) {
  using U = typename Word<BYTES>::type;
  U* base = reinterpret_cast<U*>(v.base);
  for (int64_t i = blockIdx.y; i < ix.n; i += gridDim.y) {
    const int64_t d = cuda_util::load_index(ix.dst, ix.dst_dt, i * ix.dst_stride);
    int64_t s = 0;
    if constexpr (!ZERO) s = cuda_util::load_index(ix.src, ix.src_dt, i * ix.src_stride);
    if (d == ix.pad || (!ZERO && s == ix.pad)) continue;
    if (d < 0 || d >= v.S || (!ZERO && (s < 0 || s >= v.S))) {
      if (blockIdx.x == 0 && threadIdx.x == 0) cuda_util::report(ix.status, STATUS_BAD_SLOT);
      continue;
    }
    if (!ZERO && s == d) continue;
    U* to = base + d * v.slot_stride;
    const U* from = base + s * v.slot_stride;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < v.units;
         e += int64_t(gridDim.x) * blockDim.x) {
      const int64_t off = row_offset<CONTIG>(v, e);
      if constexpr (ZERO) {
        to[off] = U{};
      } else {
        to[off] = from[off];
      }
    }
  }
}

constexpr int THREADS = 256;

template <int BYTES, bool CONTIG, bool ZERO>
void launch(const RowView& v, const Indices& ix, cudaStream_t stream) {
  const int64_t bx = std::min<int64_t>((v.units + THREADS - 1) / THREADS, 1024);
  const int64_t by = std::min<int64_t>(ix.n, 65535);
  slot_rows_kernel<BYTES, CONTIG, ZERO><<<dim3(unsigned(bx), unsigned(by)), THREADS, 0, stream>>>(v, ix);
}

// True when shape[1:] is laid out densely row-major.
bool row_is_dense(const Tensor& t) {
  int64_t expect = 1;
  for (int d = t.ndim - 1; d >= 1; --d) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

template <bool ZERO>
void run_tensor(const Tensor& t, Indices ix, const char* fn, cudaStream_t stream) {
  const int64_t es = int64_t(dtype_size(t.dtype));
  int64_t row_elems = 1;
  for (int d = 1; d < t.ndim; ++d) row_elems *= t.shape[d];
  if (row_elems == 0 || t.shape[0] == 0) return;
  RowView v{};
  v.base = static_cast<char*>(t.data);
  v.S = t.shape[0];
  if (row_is_dense(t)) {
    // Widest word dividing the base address, the slot stride and the row.
    const int64_t row_bytes = row_elems * es, slot_bytes = t.stride[0] * es;
    const auto addr = reinterpret_cast<uintptr_t>(t.data);
    int w = 16;
    while (w > 1 && (addr % uintptr_t(w) != 0 || row_bytes % w != 0 || slot_bytes % w != 0)) w /= 2;
    v.units = row_bytes / w;
    v.slot_stride = slot_bytes / w;
    switch (w) {
      case 16: launch<16, true, ZERO>(v, ix, stream); break;
      case 8: launch<8, true, ZERO>(v, ix, stream); break;
      case 4: launch<4, true, ZERO>(v, ix, stream); break;
      case 2: launch<2, true, ZERO>(v, ix, stream); break;
      default: launch<1, true, ZERO>(v, ix, stream); break;
    }
  } else {
    v.units = row_elems;
    v.slot_stride = t.stride[0];
    v.ndim = t.ndim - 1;
    for (int d = 1; d < t.ndim; ++d) {
      v.shape[d - 1] = t.shape[d];
      v.stride[d - 1] = t.stride[d];
    }
    switch (es) {
      case 8: launch<8, false, ZERO>(v, ix, stream); break;
      case 4: launch<4, false, ZERO>(v, ix, stream); break;
      case 2: launch<2, false, ZERO>(v, ix, stream); break;
      default: launch<1, false, ZERO>(v, ix, stream); break;
    }
  }
  cuda_util::check_launch(fn);
}

void check_pool(const char* fn, const std::vector<Tensor>& pool) {
  for (const Tensor& t : pool) {
    if (!t.defined()) continue;
    check::require(t.device == Device::cuda && t.ndim >= 1, fn, "pool",
                   "expected cuda tensors with a leading slot dimension");
  }
}

void check_indices(const char* fn, const char* arg, const Tensor& t, int64_t n) {
  check::index_vector(fn, arg, t, n);
  check::require(t.device == Device::cuda, fn, arg, "expected a cuda tensor");
}

}  // namespace

void copy_cuda(const std::vector<Tensor>& pool, const Tensor& src, const Tensor& dst, int64_t pad,
               const Exec& exec) {
  static constexpr const char* FN = "slot_ops::copy_cuda";
  check_indices(FN, "src", src, check::ANY);
  check_indices(FN, "dst", dst, src.shape[0]);
  check_pool(FN, pool);
  if (src.shape[0] == 0) return;
  cuda_util::require_supported_device(FN);
  const Indices ix{src.data, src.dtype, src.stride[0], dst.data, dst.dtype, dst.stride[0],
                   src.shape[0], pad, exec.device_status};
  for (const Tensor& t : pool)
    if (t.defined()) run_tensor<false>(t, ix, FN, cuda_util::stream_of(exec));
}

void zero_cuda(const std::vector<Tensor>& pool, const Tensor& slot, int64_t pad, const Exec& exec) {
  static constexpr const char* FN = "slot_ops::zero_cuda";
  check_indices(FN, "slot", slot, check::ANY);
  check_pool(FN, pool);
  if (slot.shape[0] == 0) return;
  cuda_util::require_supported_device(FN);
  const Indices ix{nullptr, DType::i32, 0, slot.data, slot.dtype, slot.stride[0],
                   slot.shape[0], pad, exec.device_status};
  for (const Tensor& t : pool)
    if (t.defined()) run_tensor<true>(t, ix, FN, cuda_util::stream_of(exec));
}

}  // namespace replayssm::slot_ops

// Argument validation shared by every public entry point. Each helper throws
// replayssm::Error naming the function and the argument.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "replayssm/types.h"

namespace replayssm::check {

// Wildcard for a dimension that is not constrained.
inline constexpr int64_t ANY = -1;

[[noreturn]] void fail(const char* fn, const char* arg, const std::string& msg);

// Present with the given rank and sizes (ANY matches anything).
void shape(const char* fn, const char* arg, const Tensor& t, std::initializer_list<int64_t> dims);
void present(const char* fn, const char* arg, const Tensor& t);
void dtype(const char* fn, const char* arg, const Tensor& t, std::initializer_list<DType> allowed);
void same_dtype(const char* fn, const char* arg, const Tensor& t, const char* other_arg, DType other);
// The last dimension has stride 1 (rows may have any strides).
void inner_contiguous(const char* fn, const char* arg, const Tensor& t);
// Fully row-major contiguous.
void contiguous(const char* fn, const char* arg, const Tensor& t);
// Data pointer and every non-unit stride are multiples of `elems` elements.
void aligned(const char* fn, const char* arg, const Tensor& t, int64_t bytes);
// Backend / tensor device agreement; a cuda tensor that states its device
// (Tensor::device_index) must be on the current one (device_index below).
void device(const char* fn, const char* arg, const Tensor& t, const Exec& exec);
// t.device_index against the current CUDA device `current` (-1: unknown,
// nothing to check).
void device_index(const char* fn, const char* arg, const Tensor& t, int current);
// The current CUDA device; -1 without CUDA or a device.
int current_cuda_device();
// An index or count tensor [n] of i32 | i64.
void index_vector(const char* fn, const char* arg, const Tensor& t, int64_t n);
// Positive integer condition.
void positive(const char* fn, const char* arg, int64_t v);
// General condition.
void require(bool ok, const char* fn, const char* arg, const std::string& msg);

// Host read of an i32 | i64 element of a (cpu) index vector / matrix.
int64_t index_at(const Tensor& t, int64_t i);
int64_t index_at(const Tensor& t, int64_t i, int64_t j);

// Host-side checks of slot vectors (cpu backends only; the device reports
// through Exec::device_status). Every slot must be pad or in [0, S); when
// `distinct`, no slot appears twice among the non-pad rows.
void slots(const char* fn, const char* arg, const Tensor& slot, int64_t pad, int64_t S,
           bool distinct);

std::string dims_str(std::initializer_list<int64_t> dims);

}  // namespace replayssm::check

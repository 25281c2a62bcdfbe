// Shared by the binding's translation units: DLPack array -> replayssm::Tensor
// views, name parsing, Exec construction and the keyword arguments common to
// every operation. See module.cpp for the conventions.
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "replayssm/delta.h"
#include "replayssm/dual.h"
#include "replayssm/types.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace replayssm;

namespace rssm_py {

using In = nb::ndarray<nb::ro>;  // read by the library (read-only sources accepted)
using Out = nb::ndarray<>;       // written by the library (must be writable)
using OptIn = std::optional<In>;
using OptOut = std::optional<Out>;

inline DType dtype_of(const char* fn, const char* arg, nb::dlpack::dtype dt) {
  using Code = nb::dlpack::dtype_code;
  if (dt.lanes == 1) {
    if (dt.code == uint8_t(Code::Float) && dt.bits == 32) return DType::f32;
    if (dt.code == uint8_t(Code::Float) && dt.bits == 16) return DType::f16;
    if (dt.code == uint8_t(Code::Float) && dt.bits == 64) return DType::f64;
    if (dt.code == uint8_t(Code::Bfloat) && dt.bits == 16) return DType::bf16;
    if (dt.code == uint8_t(Code::Int) && dt.bits == 32) return DType::i32;
    if (dt.code == uint8_t(Code::Int) && dt.bits == 64) return DType::i64;
    if (dt.code == uint8_t(Code::UInt) && dt.bits == 8) return DType::u8;
  }
  throw Error(fn, arg,
              "expected dtype fp32 | fp16 | bf16 | fp64 | int32 | int64 | uint8, got DLPack dtype "
              "(code " + std::to_string(dt.code) + ", bits " + std::to_string(dt.bits) +
                  ", lanes " + std::to_string(dt.lanes) + ")");
}

inline Device device_of(const char* fn, const char* arg, int device_type) {
  if (device_type == nb::device::cpu::value || device_type == nb::device::cuda_host::value)
    return Device::cpu;
  if (device_type == nb::device::cuda::value || device_type == nb::device::cuda_managed::value)
    return Device::cuda;
  throw Error(fn, arg,
              "expected a cpu or cuda array, got DLPack device type " + std::to_string(device_type));
}

// Zero-element arrays may carry a null data pointer, which the library reads
// as "absent"; give them a valid address that is never dereferenced.
alignas(256) inline char g_empty[256];

template <typename... Ts>
Tensor view(const char* fn, const char* arg, const nb::ndarray<Ts...>& a) {
  Tensor t;
  if (a.ndim() > size_t(MAX_DIMS))
    throw Error(fn, arg, "expected at most " + std::to_string(MAX_DIMS) + " dimensions, got " +
                             std::to_string(a.ndim()));
  t.dtype = dtype_of(fn, arg, a.dtype());
  t.device = device_of(fn, arg, a.device_type());
  // device memory (not managed memory, which any device may read): checked
  // against the current device (core/check.h device_index)
  if (a.device_type() == nb::device::cuda::value) t.device_index = int(a.device_id());
  t.ndim = int(a.ndim());
  for (int i = 0; i < t.ndim; ++i) {
    t.shape[i] = int64_t(a.shape(size_t(i)));
    t.stride[i] = int64_t(a.stride(size_t(i)));
  }
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  if (t.data == nullptr && t.numel() == 0) t.data = g_empty;
  return t;
}

template <typename A>
Tensor view(const char* fn, const char* arg, const std::optional<A>& a) {
  return a ? view(fn, arg, *a) : Tensor{};
}

inline DType dtype_from_name(const char* fn, const char* arg, const std::string& s) {
  if (s == "fp32" || s == "f32" || s == "float32" || s == "float") return DType::f32;
  if (s == "fp16" || s == "f16" || s == "float16" || s == "half") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  throw Error(fn, arg, "expected dtype name fp32 | fp16 | bf16, got '" + s + "'");
}

// Read-copy / packed-state formats (dual and shared modes).
inline ReadFormat read_format_from_name(const char* fn, const char* arg, const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return ReadFormat::bf16;
  if (s == "fp16" || s == "f16" || s == "float16") return ReadFormat::f16;
  if (s == "fp8" || s == "fp8_e4m3" || s == "e4m3") return ReadFormat::fp8_e4m3;
  if (s == "nvfp4") return ReadFormat::nvfp4;
  throw Error(fn, arg, "expected read format bf16 | fp16 | fp8 | nvfp4, got '" + s + "'");
}

inline PrecisionMode precision_mode_from_name(const char* fn, const std::string& s) {
  if (s == "single") return PrecisionMode::single;
  if (s == "dual") return PrecisionMode::dual;
  if (s == "shared") return PrecisionMode::shared;
  throw Error(fn, "mode", "expected single | dual | shared, got '" + s + "'");
}

inline Backend backend_from_name(const char* fn, const std::string& s) {
  if (s == "reference") return Backend::reference;
  if (s == "cpu") return Backend::cpu;
  if (s == "cuda") return Backend::cuda;
  throw Error(fn, "backend", "expected reference | cpu | cuda, got '" + s + "'");
}

inline SsmOp ssm_op_from_name(const char* fn, const std::string& s) {
  static const std::pair<const char*, SsmOp> ops[] = {
      {"decode", SsmOp::decode},   {"snapshot_decode", SsmOp::snapshot_decode}, {"prefill", SsmOp::prefill},
      {"replay_step", SsmOp::replay_step}, {"commit", SsmOp::commit},     {"materialize", SsmOp::materialize},
      {"flush", SsmOp::flush},     {"copy_slot", SsmOp::copy_slot},             {"reset_slot", SsmOp::reset_slot}};
  for (const auto& [name, op] : ops)
    if (s == name) return op;
  throw Error(fn, "op",
              "expected decode | snapshot_decode | prefill | replay_step | commit | materialize | flush | "
              "copy_slot | reset_slot, got '" + s + "'");
}

inline DeltaFamily family_from_name(const char* fn, const std::string& s) {
  if (s == "gdn") return DeltaFamily::gdn;
  if (s == "kda") return DeltaFamily::kda;
  throw Error(fn, "family", "expected gdn | kda, got '" + s + "'");
}

inline Exec make_exec(const char* fn, const std::string& backend, uintptr_t stream, int num_threads,
               const OptOut& device_status, const OptOut& workspace) {
  Exec e;
  e.backend = backend_from_name(fn, backend);
  e.stream = reinterpret_cast<void*>(stream);
  e.num_threads = num_threads;
  if (device_status) {
    Tensor s = view(fn, "device_status", *device_status);
    if (s.dtype != DType::i32 || s.numel() != 1)
      throw Error(fn, "device_status", "expected one int32 element, got " +
                                           std::string(dtype_name(s.dtype)) + " " + s.shape_str());
    e.device_status = static_cast<int32_t*>(s.data);
  }
  if (workspace) {  // caller scratch of the cpu backend (types.h Workspace): host memory, contiguous
    Tensor w = view(fn, "workspace", *workspace);
    if (w.device != Device::cpu || !w.is_contiguous())
      throw Error(fn, "workspace", std::string("expected a contiguous host array, got ") +
                                       (w.device != Device::cpu ? "a device array" : "a strided view"));
    e.workspace.data = w.data;
    e.workspace.bytes = size_t(w.numel()) * dtype_size(w.dtype);
  }
  return e;
}

}  // namespace rssm_py

// Keyword arguments shared by every operation.
#define EXEC_PARAMS                                                                      \
  const std::string &backend, uintptr_t stream, int num_threads, const OptOut &device_status, \
      const OptOut &workspace
#define EXEC_ARGS                                                                      \
  "backend"_a = "cpu", "stream"_a = uintptr_t(0), "num_threads"_a = 0,                 \
  "device_status"_a.none() = nb::none(), "workspace"_a.none() = nb::none()
#define EXEC() make_exec(fn, backend, stream, num_threads, device_status, workspace)


// GPU benchmark cases: device pools, inputs and the byte model of one model
// shape (design/replay.md §6). Used by bench_gpu.cpp; CUDA builds only.
#pragma once
#if defined(REPLAYSSM_WITH_CUDA)
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/ring.h"
#include "replayssm/quant.h"
#include "replayssm/types.h"

namespace replayssm::bench {

// Throws std::runtime_error naming `what` when err != cudaSuccess.
void cuda_ok(cudaError_t err, const char* what);

// An owning device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

enum class Dist { uniform, normal };  // uniform [a, b); normal (mean a, sd b)

// Fills n elements of dtype `dt` at device address `dev` (a random tile of up
// to 2^18 values, repeated).
void fill_random(void* dev, DType dt, int64_t n, Dist dist, double a, double b, uint64_t seed);

// Dtype names of design §7: fp32, fp16, bf16.
const char* dtype_label(DType dt);
bool parse_dtype_label(const std::string& s, DType* out);
// Read-copy format names of design §7: bf16, fp16, fp8 (E4M3), nvfp4.
const char* format_label(ReadFormat f);
bool parse_format_label(const std::string& s, ReadFormat* out);

// One per-layer model shape of design §6.
struct ModelShape {
  std::string preset;    // tools/presets.h name, e.g. "nemotron3"
  std::string family;    // mamba2 | gdn | kda
  int64_t H = 0;         // heads (Mamba-2) or key heads (GDN/KDA)
  int64_t P = 0, N = 0, G = 0;  // Mamba-2
  int64_t HV = 0, K = 0, V = 0; // GDN/KDA
  std::string name() const;     // "H128-P64-N128-G8" | "H16-HV64-K128-V128"
};
// Every preset of tools/presets.h, in table order.
std::vector<ModelShape> default_shapes();
// The targets' shapes: Mamba-2 H128-P64, GDN HV64, KDA.
std::vector<ModelShape> quick_shapes();
// Whether `sel` (a preset name, "all", a family, or a substring of
// "family/shape") selects the shape.
bool shape_matches(const ModelShape& s, const std::string& sel);

// Bytes one row moves per token, by kind (design §6).
struct ByteModel {
  double state = 0;    // |S|: one checkpoint / state
  double record = 0;   // one record (all ring tensors of one token)
  double inputs = 0;   // step inputs, including the slot index
  double outputs = 0;  // step outputs
  double params = 0;   // per-head parameters, once per step (not per row)
  double cursor = 0;   // cursor read + write per replay row-step
  double copy = 0;     // a packed read copy / shared state of the current format (0: none)
  double dual_extra = 0;  // dual records: what they keep beyond single ones (GDN/KDA v, β)
};

// Per-row-step averages of the replay schedule, from simulating the cursors.
struct FlushStats {
  double flush_share = 0;  // row-steps that flush
  double flush_peak = 0;   // largest share of a step's rows flushing together
  double hist_mean = 0;    // committed history records read per row-step
  double fold_mean = 0;    // records folded per row-step
};

// Modelled bytes of one step over all B rows.
double baseline_bytes_per_step(const ByteModel& m, int64_t B);
double replay_bytes_per_step(const ByteModel& m, const FlushStats& f, int64_t B);

// A benchmark case: one model shape, batch B, state dtype; device memory for
// a pool of S = nsets·B slots (nsets disjoint slot sets that successive steps
// rotate through), rings sized for L_max, and one set of inputs.
class Case {
 public:
  virtual ~Case() = default;
  // (Re)initialise the cursors for history capacity L (ring views R = L + 1):
  // each slot starts at a random ring position with a random committed count
  // in [1, L] (spread) or count L (aligned: every row flushes on the same step).
  void prepare_replay(int64_t L, bool aligned, uint64_t seed);
  // Simulates `steps` replay steps (T = 1, commit_all) from the current
  // cursors, step i on slot set i % nsets; host only.
  FlushStats simulate(int64_t steps) const;
  // Enqueue one step on slot set `set` (baseline: standard decode; replay:
  // replay step with T = 1 and commit_all).
  virtual void step(bool replay, int64_t set, const Exec& exec) = 0;

  // Speculative steps (T = 1 + drafts tokens per row, design §3).
  // Draws acceptances for `steps` steps: per row and step, each of the T − 1
  // drafts is accepted with probability `rate` until the first rejection, so
  // accepted = 1 + (leading accepted drafts) ∈ [1, T]. Returns the mean.
  double prepare_acceptance(int64_t steps, double rate, uint64_t seed);
  // Replay cursors for capacity L: random start, committed count in
  // [0, L − T] and a pending window of T records, so every step commits first.
  void prepare_spec(int64_t L, uint64_t seed);
  // Simulates `passes` × `steps` speculative replay steps from the current
  // cursors (the timed graph repeats the same acceptances) and returns the
  // averages over all but the first pass.
  FlushStats simulate_spec(int64_t steps, int passes) const;
  // Snapshot baseline pool: nsets_snap sets of B·T per-token state slots
  // (0 releases it).
  virtual void prepare_snapshot(int64_t nsets_snap) = 0;
  // Enqueue speculative step `i` (acceptances of step i % steps) on slot set
  // `set`: replay step committing the previous window, or snapshot decode.
  virtual void step_spec(bool replay, int64_t set, int64_t i, const Exec& exec) = 0;
  virtual int64_t snapshot_mem_bytes_per_row() const = 0;
  // Synchronises, copies the outputs of the last step and checks them.
  bool outputs_finite(int64_t* nonzero) const;
  virtual ByteModel bytes() const = 0;
  // Whether the library's T = 1 replay step of this case is eager
  // (core/eager.h): it then moves the baseline's bytes.
  virtual bool eager_step() const = 0;
  virtual int64_t replay_mem_bytes_per_row() const = 0;
  virtual std::string record_desc() const = 0;  // e.g. "x:bf16 dt:fp32 B:bf16"
  virtual DType record_dtype() const = 0;       // dtype of the main record

  // Dual precision and shared mode (design §4). set_read_copy(f) allocates a
  // packed copy of every slot's state in format f, written by quant_pack on
  // the device, and binds it (with the dual records) to the pool, so step /
  // step_spec with replay run the dual mode; clear_read_copy() unbinds it.
  virtual void set_read_copy(ReadFormat f) = 0;
  virtual void clear_read_copy() = 0;
  // Shared mode: standard decode on the packed copy as the only state
  // (set_read_copy first), round to nearest even.
  virtual void step_shared(int64_t set, const Exec& exec) = 0;
  virtual int64_t dual_mem_bytes_per_row() const = 0;
  virtual int64_t shared_mem_bytes_per_row() const = 0;
  // Bytes of a packed tile set per row in format f (sizes the slot sets).
  virtual int64_t copy_bytes_per_row(ReadFormat f) const = 0;

  int64_t B = 0, S = 0, nsets = 0, L = 0, L_max = 0, T = 1;
  DType state_dtype = DType::f32, act = DType::bf16;
  bool has_copy = false;
  ReadFormat read_format = ReadFormat::bf16;  // of the bound copy (has_copy)

 protected:
  void init_common(int64_t B_, int64_t nsets_, int64_t L_max_, uint64_t seed);
  Tensor slot_view(int64_t set) const;
  Tensor cursor_view() const;
  Tensor accepted_view(int64_t i) const;
  // Snapshot slot sets: releases the previous snapshot pool and, for
  // nsets_snap > 0, allocates its index [nsets_snap·B·T] (returns false on 0);
  // the family then allocates snap_state_ into snap_buf_.
  bool reset_snapshot(int64_t nsets_snap);
  // state_indices [B, T] of speculative step i (slot set i mod snap_sets_).
  Tensor snapshot_indices(int64_t i) const;
  int64_t R() const { return L + T; }

  DeviceBuffer slots_;   // [nsets, B] i32: a random permutation of the S slots
  DeviceBuffer cursor_;  // [S, 3] i32
  std::vector<int32_t> host_slots_;
  std::vector<RingCursor> host_cursor_;
  std::vector<DeviceBuffer> snap_buf_;  // snapshot pool buffers (index, states)
  void* snap_idx_ = nullptr;
  int64_t snap_sets_ = 1;
  DeviceBuffer acc_;                 // [acc_steps_, B] i32
  std::vector<int32_t> host_acc_;
  int64_t acc_steps_ = 0;
  Tensor out_;           // the step's output tensor (checked for finiteness)
  DeviceBuffer copy_;    // packed read copy [S, heads, tile_bytes] u8 (has_copy)
  int64_t tile_bytes_ = 0;
};

// Bytes of one speculative step over all B rows (T tokens per row):
// snapshot reads one state and writes T; replay as replay_bytes_per_step with
// T records appended, plus the acceptances.
double snapshot_bytes_per_step(const ByteModel& m, int64_t B, int64_t T);
double spec_replay_bytes_per_step(const ByteModel& m, const FlushStats& f, int64_t B, int64_t T);
// Dual precision (design §6): non-flush row-steps read the copy only; a flush
// reads and writes the checkpoint and writes the copy; records as replay plus
// the dual extras (appended, and read again by the fold). T tokens per row
// (T > 1: speculative, with acceptances).
double dual_bytes_per_step(const ByteModel& m, const FlushStats& f, int64_t B, int64_t T);
// Shared mode: the packed state read and written every step (T tokens per row).
double shared_bytes_per_step(const ByteModel& m, int64_t B, int64_t T);

// Builds a case of T tokens per row; the pool holds nsets·B slots. d_dtype:
// GDN/KDA ring_d dtype.
std::unique_ptr<Case> make_case(const ModelShape& shape, int64_t B, int64_t nsets, DType state,
                                DType act, DType d_dtype, int64_t L_max, uint64_t seed, int64_t T = 1);

}  // namespace replayssm::bench
#endif  // REPLAYSSM_WITH_CUDA

// Family adapters for `replayssm verify`: one interface over Mamba-2, GDN and
// KDA so the invariant checks of design/replay.md §5 are written once.
//
// Per-token tensors are [rows, T, inner...] for steps and [tokens, inner...]
// for prefill; a pool is a list of tensors with the slot as leading dim:
//   { state [S, state_inner...], rings [S, R, ring_inner...]..., cursor [S, 3] i32 }
// A baseline pool has only the state (the other entries absent).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/ring.h"
#include "presets.h"
#include "replayssm/quant.h"
#include "replayssm/types.h"

namespace replayssm::tools {

// A random input: normal(a, b) when `normal`, else uniform(a, b).
struct InputSpec {
  const char* name;
  DType dtype;
  std::vector<int64_t> inner;
  bool normal;
  double a, b;
};

struct RingSpec {
  const char* name;
  DType dtype;
  std::vector<int64_t> inner;  // after [S, R]
};

struct StepArgs {
  std::vector<Tensor> in;  // in the order of inputs()
  Tensor out;
  Tensor slot;
  int64_t pad = -1;
};

struct PoolArgs {
  std::vector<Tensor> t;  // state, rings (order of rings()), cursor
  int64_t L = 16;
  // Dual pools (docs/dual_precision.md): the read copy [S, heads, tile_bytes]
  // u8 and the extra records of dual_rings(); absent = single precision.
  Tensor read_copy;
  ReadFormat read_format = ReadFormat::bf16;
  std::vector<Tensor> dual;
};

class FamilyCase {
 public:
  virtual ~FamilyCase() = default;
  virtual Family family() const = 0;
  virtual std::string shape() const = 0;
  virtual std::vector<InputSpec> inputs() const = 0;
  virtual std::vector<int64_t> out_inner() const = 0;
  virtual std::vector<int64_t> state_inner() const = 0;
  virtual std::vector<RingSpec> rings() const = 0;
  virtual int64_t ring_length(int64_t L, int64_t T_max) const = 0;
  // Dual mode: records a dual pool adds (GDN / KDA: ring_v, ring_beta) and
  // the bytes of one packed (slot, head) tile; tiles are state_inner()[1:].
  virtual std::vector<RingSpec> dual_rings() const = 0;
  virtual int64_t tile_bytes(ReadFormat format) const = 0;

  // Thin wrappers over the public API (parameters held by the case; the
  // host or device copy is picked by exec.backend).
  virtual void decode(const StepArgs& a, const Tensor& state, const Exec& e) = 0;
  virtual void prefill(const StepArgs& a, const Tensor& cu_seqlens, const PoolArgs& p,
                       const Exec& e) = 0;
  virtual void replay_step(const StepArgs& a, const PoolArgs& p, const Tensor& accepted,
                           bool commit_all, const Exec& e) = 0;
  virtual void commit(const PoolArgs& p, const Tensor& slot, int64_t pad, const Tensor& accepted,
                      const Exec& e) = 0;
  virtual void materialize(const PoolArgs& p, const Tensor& slot, int64_t pad, const Tensor& out,
                           const Exec& e) = 0;
};

// Dual-precision checks of `replayssm verify` (tools/verify_dual.cpp): one
// pool per read format through the same random schedule on a CPU backend.
struct DualResult {
  int64_t flushes = 0;      // row flushes (per format)
  int64_t ckpt_checks = 0;  // checkpoint + cursor comparisons across formats
  int64_t keep_checks = 0;  // non-flush rows whose checkpoint and copy were compared
  int64_t copy_checks = 0;  // copies compared with quant_pack of the checkpoint
  std::vector<std::string> failures;
  int64_t failure_count = 0;
};
DualResult verify_dual(FamilyCase& fc, Backend backend, DType state, DType act, int64_t L,
                       int64_t steps, uint64_t seed);

// Host mirror of one replay step's ring bookkeeping (core/ring.h) for the
// rows of a batch: commits each row's previous acceptance (rows with pending
// records), plans T tokens (capacity L, ring length R) and, with commit_all,
// keeps all T. Rows whose slot is `pad` are skipped. Returns the rows that
// flush and adds their count to *flushes.
std::vector<bool> mirror_replay_step(std::vector<RingCursor>& cursors, const std::vector<int64_t>& slots,
                                     int64_t pad, const std::vector<int64_t>& prev_acc, int64_t T, int64_t L,
                                     int64_t R, bool commit_all, int64_t* flushes);

// Parameters (A, dt_bias, D / A_log, dt_bias) are drawn from `seed` and
// mirrored on `where`. act: dtype of x, B, C, z / q, k, v.
std::unique_ptr<FamilyCase> make_case(const Preset& p, DType act, Device where, uint64_t seed);

}  // namespace replayssm::tools

// Dual-precision and shared-quantised state modes (design/replay.md §4,
// docs/dual_precision.md).
//
//   single  today's pools: the checkpoint (f32 | f16 | bf16) serves the
//           recurrence and the reads.
//   dual    the pool keeps the high-precision checkpoint AND a packed read
//           copy (Mamba2Pool / DeltaPool: read_copy, read_format; GDN/KDA also
//           ring_v, ring_beta). Pass such a pool to the ordinary entry points
//           (mamba2_replay_step, delta_prefill, ...): they keep the copy equal
//           to quant_pack of the checkpoint and read only the copy on steps
//           that do not flush. The checkpoint trajectory does not depend on
//           the copy's format (bit for bit, per backend).
//   shared  one quantised state, used for both the recurrence and the reads:
//           standard decode on a packed pool (the baseline whose rounding
//           compounds), with optional stochastic rounding.
//
// Packed pools are u8 [S, heads, tile_bytes] with one tile per (slot, head):
// Mamba-2 [P, N], GDN/KDA [V, K] (the contiguous axis, which the read GEMVs
// contract over, carries the block scales). Dual mode runs on the reference
// and cpu backends and on the cuda backend (device tensors; every entry point;
// flushes decided on the device from the cursors, graph-safe;
// Mamba-2 nvfp4 copies there need N a multiple of 32). Shared mode
// and quant_pack_stochastic also run on the cuda backend (device tensors; one
// block per (row, head) tile, fp32 recurrence as mamba2_decode / delta_decode;
// given the same fp32 tile its bytes equal the cpu's, stochastic rounding
// included). There slots are checked on the device: a call with a slot
// outside [0, S) writes nothing and sets STATUS_BAD_SLOT (Exec::device_status);
// distinct slots are the caller's duty, as for mamba2_decode. The rounding
// step is a host value: a captured CUDA graph replays the step it captured.
#pragma once
#include <cstdint>

#include "replayssm/delta.h"
#include "replayssm/mamba2.h"
#include "replayssm/quant.h"
#include "replayssm/types.h"

namespace replayssm {

enum class PrecisionMode : int8_t { single, dual, shared };
const char* precision_mode_name(PrecisionMode mode);  // "single", "dual", "shared"

// Rounding of the shared mode's state after every step. Stochastic rounding
// picks one of the two representable neighbours of x/scale (block scales
// chosen as for round-to-nearest) with probability proportional to
// proximity; the random bits are a hash of (seed, slot, step, element), so a
// run is reproducible and independent of threading and batching.
struct QuantRounding {
  bool stochastic = false;
  uint64_t seed = 0;
  uint64_t step = 0;  // the caller's step counter (one value per call)
};

// Packs n tiles like quant_pack, rounding stochastically with the hash of
// (rounding.seed, tile_ids[i], rounding.step, element index in the tile).
// in [n, R, K] f32, packed [n, tile_bytes] u8; tile_ids [n] i64 (absent: i).
// Every tile's scales equal those quant_pack writes for the same input.
void quant_pack_stochastic(ReadFormat format, const Tensor& in, const Tensor& packed,
                           const Tensor& tile_ids, const QuantRounding& rounding,
                           const Exec& exec);

// Shared mode: standard decode (as mamba2_decode / delta_decode) on a packed
// pool: each row's tiles are decoded, the T tokens applied in the backend's
// precision (reference fp64, cpu and cuda fp32), and the state re-encoded in `format`
// (round to nearest even, or stochastic; the tile id of (slot s, head h) is
// s·heads + h). packed_state: Mamba-2 [S, H, tile(P, N)], GDN/KDA
// [S, HV, tile(V, K)] u8.
void mamba2_decode_shared(const Mamba2Step& step, const Tensor& packed_state, ReadFormat format,
                          const QuantRounding& rounding, const Exec& exec);
void delta_decode_shared(DeltaFamily f, const DeltaStep& step, const Tensor& packed_state,
                         ReadFormat format, const QuantRounding& rounding, const Exec& exec);

// Bytes of one (slot, head) tile of a read copy / packed pool.
int64_t mamba2_tile_bytes(ReadFormat format, const Mamba2Shape& s);
int64_t delta_tile_bytes(ReadFormat format, const DeltaShape& s);

// Pool bytes per row (one layer) per mode:
//   single  = *_replay_bytes_per_row (format ignored)
//   dual    = single + read copy (+ GDN/KDA records of v and β per ring entry)
//   shared  = heads · tile_bytes (no ring, no high-precision state; state,
//             act, L and T_max ignored)
int64_t mamba2_state_bytes_per_row(PrecisionMode mode, const Mamba2Shape& s, DType state,
                                   ReadFormat format, DType act, int64_t L, int64_t T_max);
int64_t delta_state_bytes_per_row(PrecisionMode mode, DeltaFamily f, const DeltaShape& s,
                                  DType state, ReadFormat format, DType act, DType d_dtype,
                                  int64_t L, int64_t T_max);

}  // namespace replayssm

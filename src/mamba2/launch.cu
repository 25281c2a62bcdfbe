// CUDA backend of the Mamba-2 family: builds the kernel parameter block from
// validated tensors (api.cpp), picks the tile (heuristics.h) and launches.
// Launches are stream-ordered, allocate nothing and never synchronise, so a
// step (state kernel + cursor kernel) can be captured in a CUDA graph. Slot
// indices, cursors and accepted counts are checked on the device
// (Exec::device_status).
#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/eager.h"
#include "cuda/runtime.h"
#include "mamba2/backend.h"
#include "mamba2/cursor_kernel.cuh"
#include "mamba2/heuristics.h"
#include "mamba2/launchers.cuh"
#include "mamba2/replay1_kernel.cuh"

namespace replayssm::mamba2::cuda {

void set_dims(kern::Params& p, const Dims& d) {
  p.B = d.B;
  p.S = d.S;
  p.T = int(d.T);
  p.H = int(d.H);
  p.P = int(d.P);
  p.N = int(d.N);
  p.G = int(d.G > 0 ? d.G : 1);  // baseline pools have no groups to stage
  p.hpg = p.H / p.G;
  p.L = int(d.L);
  p.R = int(d.R);
  p.tokens = d.tokens;
}

void set_params(kern::Params& p, const Tensor& A, const Tensor& dt_bias, const Tensor& D,
                bool dt_softplus) {
  p.A = static_cast<const float*>(A.data);
  p.A_s = A.stride[0];
  if (dt_bias.defined()) {
    p.dt_bias = static_cast<const float*>(dt_bias.data);
    p.dtb_s = dt_bias.stride[0];
  }
  if (D.defined()) {
    p.D = static_cast<const float*>(D.data);
    p.D_s = D.stride[0];
  }
  p.dt_softplus = dt_softplus;
}

// Step tensors [B, T, ...].
void set_step(kern::Params& p, const Mamba2Step& s) {
  p.x = s.x.data; p.x_b = s.x.stride[0]; p.x_t = s.x.stride[1]; p.x_h = s.x.stride[2];
  p.dt = s.dt.data; p.dt_dtype = s.dt.dtype; p.dt_b = s.dt.stride[0]; p.dt_t = s.dt.stride[1];
  p.Bm = s.Bm.data; p.B_b = s.Bm.stride[0]; p.B_t = s.Bm.stride[1]; p.B_g = s.Bm.stride[2];
  p.Cm = s.Cm.data; p.C_b = s.Cm.stride[0]; p.C_t = s.Cm.stride[1]; p.C_g = s.Cm.stride[2];
  if (s.z.defined()) {
    p.z = s.z.data; p.z_b = s.z.stride[0]; p.z_t = s.z.stride[1]; p.z_h = s.z.stride[2];
  }
  p.y = s.y.data; p.y_b = s.y.stride[0]; p.y_t = s.y.stride[1]; p.y_h = s.y.stride[2];
  set_params(p, s.A, s.dt_bias, s.D, s.dt_softplus);
  p.pad = s.pad_slot_id;
}

void set_slot(kern::Params& p, const Tensor& slot, int64_t pad) {
  p.slot = slot.data;
  p.slot_dtype = slot.dtype;
  p.slot_s = slot.stride[0];
  p.pad = pad;
}

namespace {

using kern::LaunchCfg;
using kern::Mode;
using kern::Params;

// Activation dtype → f.template operator()<AD>().
template <class Fn>
void by_act(const char* fn, DType act, Fn&& f) {
  switch (act) {
    case DType::f32: return f.template operator()<DType::f32>();
    case DType::f16: return f.template operator()<DType::f16>();
    case DType::bf16: return f.template operator()<DType::bf16>();
    default: check::fail(fn, "x", std::string("unsupported activation dtype ") + dtype_name(act));
  }
}
// The one dispatch switch of the family: (state dtype, activation dtype)
// → the instantiation in kernels_<state dtype>.cu.
template <class Fn>
void dispatch(const char* fn, DType state, DType act, Fn&& f) {
  auto with = [&]<DType SD>() { by_act(fn, act, [&]<DType AD>() { f.template operator()<SD, AD>(); }); };
  switch (state) {
    case DType::f32: return with.template operator()<DType::f32>();
    case DType::f16: return with.template operator()<DType::f16>();
    case DType::bf16: return with.template operator()<DType::bf16>();
    default: check::fail(fn, "state", std::string("unsupported state dtype ") + dtype_name(state));
  }
}
// The same for a packed read copy: (QF_FP8 | QF_NVFP4, activation dtype) →
// the instantiation in dual_replay_<format>.cu.
template <class Fn>
void dispatch_packed(const char* fn, int qf, DType act, Fn&& f) {
  if (qf == QF_FP8) by_act(fn, act, [&]<DType AD>() { f.template operator()<QF_FP8, AD>(); });
  else by_act(fn, act, [&]<DType AD>() { f.template operator()<QF_NVFP4, AD>(); });
}

// Prefill tensors [tokens, ...]: token index plays t, row offset b = 0.
void set_prefill(Params& p, const Mamba2Prefill& s) {
  p.x = s.x.data; p.x_t = s.x.stride[0]; p.x_h = s.x.stride[1];
  p.dt = s.dt.data; p.dt_dtype = s.dt.dtype; p.dt_t = s.dt.stride[0];
  p.Bm = s.Bm.data; p.B_t = s.Bm.stride[0]; p.B_g = s.Bm.stride[1];
  p.Cm = s.Cm.data; p.C_t = s.Cm.stride[0]; p.C_g = s.Cm.stride[1];
  if (s.z.defined()) {
    p.z = s.z.data; p.z_t = s.z.stride[0]; p.z_h = s.z.stride[1];
  }
  p.y = s.y.data; p.y_t = s.y.stride[0]; p.y_h = s.y.stride[1];
  set_params(p, s.A, s.dt_bias, s.D, s.dt_softplus);
  p.cu = s.cu_seqlens.data; p.cu_dtype = s.cu_seqlens.dtype; p.cu_s = s.cu_seqlens.stride[0];
  if (s.initial.defined()) {
    p.initial = static_cast<const int32_t*>(s.initial.data);
    p.init_s = s.initial.stride[0];
  }
  p.pad = s.pad_slot_id;
}

void set_state(Params& p, const Tensor& state) {
  p.state = state.data;
  p.st_s = state.stride[0]; p.st_h = state.stride[1]; p.st_p = state.stride[2];
}

void set_pool(Params& p, const Mamba2Pool& pool) {
  set_state(p, pool.state);
  if (!pool.cursor.defined()) return;
  p.rx = pool.ring_x.data;
  p.rx_s = pool.ring_x.stride[0]; p.rx_r = pool.ring_x.stride[1]; p.rx_h = pool.ring_x.stride[2];
  p.rdt = static_cast<float*>(pool.ring_dt.data);
  p.rdt_s = pool.ring_dt.stride[0]; p.rdt_r = pool.ring_dt.stride[1];
  p.rB = pool.ring_B.data;
  p.rB_s = pool.ring_B.stride[0]; p.rB_r = pool.ring_B.stride[1]; p.rB_g = pool.ring_B.stride[2];
  p.cursor = static_cast<int32_t*>(pool.cursor.data);
  p.cur_s = pool.cursor.stride[0];
}

void set_accepted(Params& p, const Tensor& acc) {
  if (!acc.defined()) return;
  p.acc = acc.data;
  p.acc_dtype = acc.dtype;
  p.acc_s = acc.stride[0];
}

RowGeometry geometry(const char* fn, Params& p, DType state) {
  const RowGeometry g = row_geometry(p.N, state);
  check::require(g.vpl <= MAX_VPL, fn, "state",
                 "the cuda backend supports d_state N <= " + std::to_string(32 * MAX_VPL * g.vec) +
                     " for " + dtype_name(state) + " state, got N = " + std::to_string(p.N));
  p.nv = g.nv;
  p.lpr = g.lpr;
  p.rpw = g.rpw;
  p.ns = g.ns;
  return g;
}

LaunchCfg config(const char* fn, Params& p, const Tile& t, int64_t smem_bytes, const Exec& exec,
                 int vpl, const cuda_util::DeviceLimits& info) {
  check::require(smem_bytes <= info.smem_optin, fn, "x",
                 "the tile needs " + std::to_string(smem_bytes) + " bytes of shared memory (T = " +
                     std::to_string(p.T) + ", L = " + std::to_string(p.L) + "), the device offers " +
                     std::to_string(info.smem_optin));
  p.nh = t.nh;
  p.np = t.np;
  p.hchunks = t.hchunks;
  p.pchunks = t.pchunks;
  LaunchCfg c;
  c.grid = dim3(unsigned(t.blocks));
  c.smem = size_t(smem_bytes);
  c.stream = cuda_util::stream_of(exec);
  c.vpl = vpl;
  c.fn = fn;
  return c;
}

void launch_cursor(const char* fn, Params p, Mode mode, const Exec& exec) {
  p.mode = mode;
  if (p.B == 0) return;
  const unsigned blocks = unsigned((p.B + 255) / 256);
  if (mode != Mode::step) {
    kern::mamba2_cursor_kernel<<<blocks, 256, 0, cuda_util::stream_of(exec)>>>(p);
    cuda_util::check_launch(fn);
    return;
  }
  // After the replay kernel: programmatic dependent launch, so the cursor
  // kernel's launch overlaps the replay grid (it waits for the grid's
  // completion on the device, griddepcontrol.wait, before writing).
  cuda_util::check(cuda_util::launch_dependent(kern::mamba2_cursor_kernel, dim3(blocks), dim3(256), 0,
                                               cuda_util::stream_of(exec), p),
                   fn, "kernel launch");
}

// Hot kernels: validate N as every kernel does, then use the hot geometry.
RowGeometry hot(const char* fn, Params& p, DType state) {
  geometry(fn, p, state);
  const RowGeometry g = hot_geometry(p.N, state);
  p.nv = g.nv;
  p.lpr = g.lpr;
  p.rpw = g.rpw;
  p.ns = g.ns;
  return g;
}
// Rows in flight per lane group of the hot kernels (one row of HOT_VPL vectors).
int hot_unroll(const RowGeometry&) { return 1; }

// Decode and snapshot decode share one kernel.
void launch_decode_kernel(const char* fn, Params& p, DType state, DType act, const Exec& exec) {
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  const RowGeometry g = hot(fn, p, state);
  auto smem = [&](int64_t nh, int64_t np) {
    return 4 * (p.eager ? eager_decode_smem_floats(p.T, g.ns, nh, np, p.L) : decode_smem_floats(p.T, g.ns, nh, np));
  };
  const int rpp = rows_per_pass(g, hot_unroll(g));
  // REPLAYSSM_M2_DEC_PASSES: the block's passes, for measurements
  const int passes = std::max(1, cuda_util::env_int("REPLAYSSM_M2_DEC_PASSES", DECODE_PASSES));
  const Tile t = choose_tile(p.B, p.H, p.G, p.P, rpp, info.sms, smem, int64_t(passes) * rpp);
  p.stages = hot_stages(smem(t.nh, t.np), info.smem_per_sm, DECODE_BLOCKS_PER_SM,
                        cuda_util::env_int("REPLAYSSM_M2_DEC_STAGES", MAX_HOT_STAGES));
  LaunchCfg c = config(fn, p, t, smem(t.nh, t.np) + p.stages * STAGE_BYTES, exec, g.vpl, info);
  // The last r rows (heuristics.h DECODE_TAIL_ROWS; REPLAYSSM_M2_DEC_TAIL_ROWS
  // = r for measurements, 0 none) in tiles of DECODE_TAIL_PASSES passes
  // (REPLAYSSM_M2_DEC_TAIL_PASSES) at the end of the grid (decode_kernel.cuh
  // TAIL), when those tiles are no larger than the others.
  Params q = p;
  const int64_t tr = cuda_util::env_int("REPLAYSSM_M2_DEC_TAIL_ROWS", DECODE_TAIL_ROWS);
  if (!p.eager && p.mode == Mode::decode && tr > 0 && tr < p.B) {
    const int tp = std::max(1, cuda_util::env_int("REPLAYSSM_M2_DEC_TAIL_PASSES", DECODE_TAIL_PASSES));
    const Tile u = choose_tile(tr, p.H, p.G, p.P, rpp, info.sms, smem, int64_t(tp) * rpp);
    if (u.nh <= t.nh && u.np <= t.np) {
      q.tb0 = int(p.B - tr);
      q.big = int(int64_t(q.tb0) * p.G * t.hchunks * t.pchunks);
      q.tnh = u.nh;
      q.tnp = u.np;
      q.thchunks = u.hchunks;
      q.tpchunks = u.pchunks;
      c.grid = dim3(unsigned(q.big + u.blocks));
    }
  }
  dispatch(fn, state, act, [&]<DType SD, DType AD>() { kern::launch_decode<SD, AD>(q, c); });
}

// Materialize and flush share the fold kernel; the decays come from pool.A.
void launch_fold_kernel(const char* fn, Params& p, const Mamba2Pool& pool, const Exec& exec) {
  if (pool.A.defined()) {
    p.A = static_cast<const float*>(pool.A.data);
    p.A_s = pool.A.stride[0];
  }
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  const RowGeometry g = geometry(fn, p, pool.state.dtype);
  auto smem = [&](int64_t nh, int64_t) { return 4 * fold_smem_floats(p.L, g.ns, nh); };
  const Tile t = choose_tile(p.B, p.H, p.G, p.P, rows_per_pass(g, 2), info.sms, smem);
  const LaunchCfg c = config(fn, p, t, smem(t.nh, t.np), exec, MAX_VPL, info);
  const DType rec = pool.ring_x.defined() ? pool.ring_x.dtype : DType::f32;
  dispatch(fn, pool.state.dtype, rec, [&]<DType SD, DType AD>() { kern::launch_fold<SD, AD>(p, c); });
}

// T <= 8 with N = 128 (every model shape of design §6): the bulk-copy replay
// kernel (replay1_kernel.cuh; T > 1 on tensor cores), when each slot's heads are one contiguous,
// 16-byte aligned block and one head fits in shared memory; otherwise the
// shared-memory-staged kernel (replay_kernel.cuh) serves the step. `state` is
// the dtype streamed (the checkpoint, or a bf16 / f16 read copy with p.dual).
bool replay1_fits(const Params& p, int state_size) {
  const int64_t vec = 16 / state_size;  // bulk copies: 16-byte aligned slots
  // Heads of a slot stored as one contiguous [H, P, N] block (the layout the
  // GPU tests run), so a sweep is one copy; padded rows or heads take the
  // staged kernel.
  // T > 1: a 16-row tensor-core tile must lie in one head (its history terms
  // share the head's coefficients)
  return p.T <= kern::R1_MAX_T && (p.T == 1 || p.P % 16 == 0) && p.N == kern::R1_N && reinterpret_cast<uintptr_t>(p.state) % 16 == 0 && p.st_s % vec == 0 &&
         p.st_p == kern::R1_N && p.st_h == int64_t(p.P) * kern::R1_N &&
         kern::replay1_smem(p.L, p.T, 1, p.P, 4, state_size, 1, p.T > 1).bytes <= 200 * 1024;
}

// The ring entries by bulk copies (one per entry and array) when each entry's
// x of a block's hb heads, B of the group and δ of the heads are contiguous,
// 16-byte aligned runs landing unpadded in shared memory; otherwise the
// kernel gathers them in 16-byte chunks.
bool replay1_ring_bulk(const Params& p, int hb, int as) {
  const int64_t ca = 16 / as;
  auto al = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return al(p.rx) && p.rx_h == p.P && p.P % 8 == 0 && p.P % ca == 0 && p.rx_s % ca == 0 && p.rx_r % ca == 0 &&
         al(p.rB) && p.rB_s % ca == 0 && p.rB_r % ca == 0 && p.rB_g % ca == 0 && al(p.rdt) && p.rdt_s % 4 == 0 &&
         p.rdt_r % 4 == 0 && hb % REPLAY1_RING_BULK_HEADS == 0 && p.hpg % REPLAY1_RING_BULK_HEADS == 0;
}

// Heads per block: the largest power of two dividing the group's heads whose
// state fits REPLAY1_BLOCK_BYTES, then heuristics.h replay1_heads_per_block
// (small batches: fewer blocks); stages: as many 32 KiB sweeps
// (2 to 4) as fit next to the staged records in REPLAY1_SMEM, two blocks per SM
// (228 KiB of shared memory less 1 KiB reserved per block).
constexpr int64_t REPLAY1_BLOCK_BYTES = 256 * 1024;
constexpr int64_t REPLAY1_SMEM = 113 * 1024;

// Bytes of a state row (qf: of a packed copy's row of codes and its srb scale
// bytes) and of a sweep's stage.
int64_t replay1_row_bytes(int qf, int srb, int state_size) {
  return qf == QF_NONE ? int64_t(kern::R1_N) * state_size : qf == QF_NVFP4 ? kern::R1_N / 2 + srb : kern::R1_N + srb;
}
int64_t replay1_stage_bytes(int qf, int64_t P, int srb, int state_size) {
  return qf != QF_NONE ? kern::replay1_qsweep_bytes(qf, int(P), srb)
                       : kern::replay1_sweep_rows(state_size) * replay1_row_bytes(qf, srb, state_size);
}
// Bytes of the block's arrays for nh heads (replay1_smem without stages).
int64_t replay1_array_bytes(int64_t L, int64_t T, int nh, int64_t P, int act_size, int state_size, int qf,
                            int srb) {
  return kern::replay1_smem(int(L), int(T), nh, int(P), act_size, state_size, 0, T > 1, qf, srb).bytes;
}

}  // namespace

// The largest power of two of a group's heads whose rows fit
// REPLAY1_BLOCK_BYTES and whose arrays fit REPLAY1_SMEM beside two sweeps,
// then heuristics.h replay1_heads_per_block (backend.h).
int replay1_tile_heads(int64_t B, int64_t G, int64_t hpg, int64_t P, int64_t L, int64_t T, int act_size,
                       int state_size, int qf, int srb, int sms, int blocks_per_sm) {
  const int64_t row_bytes = replay1_row_bytes(qf, srb, state_size);
  const int64_t sweep_bytes = replay1_stage_bytes(qf, P, srb, state_size);
  int hb = 1;
  while (hpg % (2 * hb) == 0 && 2 * hb * P * row_bytes <= REPLAY1_BLOCK_BYTES &&
         replay1_array_bytes(L, T, 2 * hb, P, act_size, state_size, qf, srb) + 2 * sweep_bytes <= REPLAY1_SMEM)
    hb *= 2;
  return replay1_heads_per_block(B, G, int(hpg), hb, int(T), sms, blocks_per_sm);
}

namespace {

// qf (QF_FP8 / QF_NVFP4): the state is a packed read copy (replay1_qfits);
// dependent: launched as the previous kernel's programmatic dependent.
void launch_replay1_kernel(const char* fn, Params& p, DType state, DType act, const Exec& exec,
                           int qf = QF_NONE, bool dependent = false) {
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  const int ss = qf != QF_NONE ? 1 : int(dtype_size(state)), as = int(dtype_size(act));
  const int srb = qf != QF_NONE ? int(p.q_srb) : 0;
  const int64_t sweep_bytes = replay1_stage_bytes(qf, p.P, srb, ss);
  const int hb = replay1_tile_heads(p.B, p.G, p.hpg, p.P, p.L, p.T, as, ss, qf, srb, info.sms,
                                    cuda_util::env_int("REPLAYSSM_M2_R1_BPS", 0));
  const int nsw = int(ceil_div(int64_t(hb) * p.P, kern::replay1_sweep_rows(ss)));
  p.stages = int(std::clamp<int64_t>(
      (REPLAY1_SMEM - replay1_array_bytes(p.L, p.T, hb, p.P, as, ss, qf, srb)) / sweep_bytes, 1, kern::R1_MAX_STAGES));
  p.stages = std::min(p.stages, nsw);
  Tile t;
  t.nh = hb;
  t.np = p.P;
  t.hchunks = p.hpg / hb;
  t.pchunks = 1;
  t.blocks = p.B * p.G * t.hchunks;
  p.r1 = kern::replay1_smem(p.L, p.T, hb, p.P, as, ss, p.stages, p.T > 1, qf, srb);
  p.r1.ring_bulk = replay1_ring_bulk(p, hb, as) ? 1 : 0;
  p.rec_pf = replay1_prefetch_distance(p.B, p.T, p.dual, ss, info.sms, cuda_util::env_int("REPLAYSSM_M2_PF", -1));
  p.t1_l2pf = qf != QF_NONE ? 0
                            : replay1_sweep_prefetch(t.blocks, int(p.T), p.dual, ss, info.sms,
                                                     cuda_util::device_peak_gbps(),
                                                     cuda_util::env_int("REPLAYSSM_M2_T1_L2PF", -1));
  p.fold_tc = replay1_fold_tc(int(p.T), p.dual, ss, cuda_util::env_int("REPLAYSSM_M2_FOLD_TC", -1));
  LaunchCfg c = config(fn, p, t, p.r1.bytes, exec, 1, info);
  c.dependent = dependent;
  if (qf != QF_NONE)
    dispatch_packed(fn, qf, act, [&]<int QF, DType AD>() { kern::launch_replay1_packed<QF, AD>(p, c); });
  else
    dispatch(fn, state, act, [&]<DType SD, DType AD>() { kern::launch_replay1<SD, AD>(p, c); });
}

// The bulk-copy T = 1 stream over a packed copy (replay1_kernel.cuh, QF):
// N = 128, sweeps of 256 rows of whole heads (P divides 256), every copied
// run (a head's codes, its scale rows, the nvfp4 tensor scale) 16-byte
// aligned, and replay1_fits' shared-memory bound.
bool replay1_qfits(const Params& p, int qf) {
  const int64_t rowb = qf == QF_NVFP4 ? kern::R1_N / 2 : kern::R1_N;
  return p.T == 1 && p.N == kern::R1_N && p.P <= 256 && 256 % p.P == 0 && reinterpret_cast<uintptr_t>(p.state) % 16 == 0 &&
         p.st_s % 16 == 0 && p.st_h % 16 == 0 && p.st_p == rowb && p.q_scale_off % 16 == 0 &&
         (p.P * p.q_srb) % 16 == 0 && (qf != QF_NVFP4 || p.q_t_off % 16 == 0) &&
         kern::replay1_smem(p.L, p.T, 1, p.P, 4, 1, 1, false, qf, int(p.q_srb)).bytes <= 200 * 1024;
}

// Dual precision (pool.read_copy): the pack kernel folds the flushing rows
// into the checkpoint and re-packs their copy, then the replay kernel
// streams the read copy (p.dual: flushing rows run with an empty history and
// write no state) and the cursor kernel moves the cursors. A bf16 / f16 copy
// is a plain [P, N] matrix of that dtype inside each tile (tile and slot
// strides are multiples of 16 bytes), so it takes the state-dtype stream;
// fp8 / nvfp4 take the packed stream (QF_FP8 / QF_NVFP4): the bulk-copy
// kernel where replay1_qfits holds (T = 1, N = 128), else replay_kernel.cuh.
// Everything is validated before the first launch.
void dual_replay_step(const char* fn, const Params& base, const Mamba2Pool& pool, DType act,
                      const Exec& exec) {
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  const Tensor& rc = pool.read_copy;
  const ReadFormat fmt = pool.read_format;
  Params p = base;
  p.dual = true;
  p.state = rc.data;
  const int64_t act_size = int64_t(dtype_size(act));
  const bool packed = fmt == ReadFormat::fp8_e4m3 || fmt == ReadFormat::nvfp4;
  const int qf = fmt == ReadFormat::fp8_e4m3 ? QF_FP8 : fmt == ReadFormat::nvfp4 ? QF_NVFP4 : QF_NONE;
  const DType sd = fmt == ReadFormat::f16 ? DType::f16 : DType::bf16;  // unpacked copies
  RowGeometry g;
  if (!packed) {
    check::require(p.N % 8 == 0, fn, "pool.read_format",
                   std::string("the cuda backend streams ") + read_format_name(fmt) +
                       " copies in 16-byte vectors: d_state N must be a multiple of 8, got N = " +
                       std::to_string(p.N));
    p.st_s = rc.stride[0] / 2;
    p.st_h = rc.stride[1] / 2;
    p.st_p = p.N;
    g = hot(fn, p, sd);
  } else {
    const QuantLayout lay = quant_layout(fmt, p.P, p.N);
    p.st_s = rc.stride[0];
    p.st_h = rc.stride[1];
    p.st_p = lay.code_row_bytes;
    p.q_scale_off = lay.scale_offset;
    p.q_srb = lay.scale_row_bytes;
    p.q_t_off = lay.tensor_scale_offset;
    g = packed_hot_geometry(p.N, qf);
    check::require(p.N % g.vec == 0 && g.vpl <= HOT_VPL, fn, "pool.read_format",
                   std::string("the cuda backend streams ") + read_format_name(fmt) +
                       " copies in vectors of " + std::to_string(g.vec) +
                       " values: d_state N must be a multiple of " + std::to_string(g.vec) +
                       " and at most " + std::to_string(32 * HOT_VPL * g.vec) + ", got N = " +
                       std::to_string(p.N));
    p.nv = g.nv;
    p.lpr = g.lpr;
    p.rpw = g.rpw;
    p.ns = g.ns;
  }
  auto smem = [&](int64_t nh, int64_t np) {
    return replay_smem(p.T, p.L, g.ns, nh, np, act_size).bytes +
           (packed ? packed_scale_smem(nh, np, p.q_srb) : 0);
  };
  const int rpp = rows_per_pass(g, hot_unroll(g));
  const Tile t = choose_tile(p.B, p.H, p.G, p.P, rpp, info.sms, smem, int64_t(HOT_PASSES) * rpp);
  p.stages = hot_stages(smem(t.nh, t.np), info.smem_per_sm, HOT_BLOCKS_PER_SM);
  const LaunchCfg c = config(fn, p, t, smem(t.nh, t.np) + p.stages * STAGE_BYTES, exec, g.vpl, info);
  kern::launch_dual_pack(fn, base, rc, fmt, pool.state.dtype, pool.ring_x.dtype, true, info.sms,
                         info.smem_optin, info.smem_per_sm, cuda_util::stream_of(exec));
  // The bulk-copy kernel overlaps the pack kernel (its programmatic
  // dependent: flushing rows wait for it on the device, replay1_kernel.cuh).
  if (packed && replay1_qfits(p, qf)) launch_replay1_kernel(fn, p, sd, act, exec, qf, true);
  else if (packed) dispatch_packed(fn, qf, act, [&]<int QF, DType AD>() { kern::launch_replay_packed<QF, AD>(p, c); });
  else if (replay1_fits(p, 2)) launch_replay1_kernel(fn, p, sd, act, exec, QF_NONE, true);
  else dispatch(fn, sd, act, [&]<DType SD, DType AD>() { kern::launch_replay<SD, AD>(p, c); });
  launch_cursor(fn, p, Mode::step, exec);
}

// Dual precision after prefill / flush: re-pack the copy of every row.
void dual_repack(const char* fn, const Params& p, const Mamba2Pool& pool, DType rec, const Exec& exec) {
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  kern::launch_dual_pack(fn, p, pool.read_copy, pool.read_format, pool.state.dtype, rec, false,
                         info.sms, info.smem_optin, info.smem_per_sm, cuda_util::stream_of(exec));
}

}  // namespace

void decode(const Mamba2Step& step, const Tensor& state, const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_decode";
  cuda_util::require_supported_device(fn);
  if (d.B == 0) return;
  Params p;
  set_dims(p, d);
  p.mode = Mode::decode;
  p.status = exec.device_status;
  set_step(p, step);
  set_slot(p, step.slot, step.pad_slot_id);
  set_state(p, state);
  launch_decode_kernel(fn, p, state.dtype, step.x.dtype, exec);
}

void snapshot_decode(const Mamba2Step& step, const Tensor& state, const Tensor& state_indices,
                     const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_snapshot_decode";
  cuda_util::require_supported_device(fn);
  if (d.B == 0) return;
  Params p;
  set_dims(p, d);
  p.mode = Mode::snapshot;
  p.status = exec.device_status;
  set_step(p, step);
  set_state(p, state);
  set_accepted(p, num_accepted);
  p.sidx = state_indices.data;
  p.sidx_dtype = state_indices.dtype;
  p.sidx_b = state_indices.stride[0];
  p.sidx_t = state_indices.stride[1];
  launch_decode_kernel(fn, p, state.dtype, step.x.dtype, exec);
}

void prefill(const Mamba2Prefill& pf, const Mamba2Pool& pool, const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_prefill";
  cuda_util::require_supported_device(fn);
  if (d.B == 0) return;
  Params p;
  set_dims(p, d);
  p.mode = Mode::prefill;
  p.status = exec.device_status;
  set_prefill(p, pf);
  set_slot(p, pf.slot, pf.pad_slot_id);
  set_pool(p, pool);
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  const RowGeometry g = geometry(fn, p, pool.state.dtype);
  const Tile t = prefill_tile(p.B, p.H, p.G, p.P, g);
  const LaunchCfg c = config(fn, p, t, 4 * prefill_smem_floats(p.L, g.ns, t.nh), exec, MAX_VPL, info);
  dispatch(fn, pool.state.dtype, pf.x.dtype,
           [&]<DType SD, DType AD>() { kern::launch_prefill<SD, AD>(p, c); });
  if (p.cursor) launch_cursor(fn, p, Mode::prefill, exec);
  if (pool.read_copy.defined()) dual_repack(fn, p, pool, pf.x.dtype, exec);
}

void replay_step(const Mamba2Step& step, const Mamba2Pool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_replay_step";
  cuda_util::require_supported_device(fn);
  if (d.B == 0) return;
  Params p;
  set_dims(p, d);
  p.mode = Mode::step;
  p.status = exec.device_status;
  p.commit_all = commit_all;
  set_step(p, step);
  set_slot(p, step.slot, step.pad_slot_id);
  set_pool(p, pool);
  set_accepted(p, num_accepted);
  p.jmax = p.L + p.T;
  if (pool.read_copy.defined()) return dual_replay_step(fn, p, pool, step.x.dtype, exec);
  // Small batches: eager (decode_kernel.cuh, EAGER; records in the
  // activation dtype, as the fold reads them)
  if (p.T == 1 && commit_all && pool.ring_x.dtype == step.x.dtype && pool.ring_B.dtype == step.x.dtype &&
      eager_by_rule(d.B, d.H * d.P * d.N, int64_t(dtype_size(pool.state.dtype)))) {
    p.eager = true;
    p.ctr = cuda_util::row_counters(fn, d.B, exec.stream);
    launch_decode_kernel(fn, p, pool.state.dtype, step.x.dtype, exec);
    if (!p.ctr) launch_cursor(fn, p, Mode::step, exec);
    return;
  }
  if (replay1_fits(p, int(dtype_size(pool.state.dtype)))) {
    launch_replay1_kernel(fn, p, pool.state.dtype, step.x.dtype, exec);
    return launch_cursor(fn, p, Mode::step, exec);
  }
  const cuda_util::DeviceLimits info = cuda_util::device_limits(fn);
  const RowGeometry g = hot(fn, p, pool.state.dtype);
  const int64_t act_size = int64_t(dtype_size(step.x.dtype));
  auto smem = [&](int64_t nh, int64_t np) { return replay_smem(p.T, p.L, g.ns, nh, np, act_size).bytes; };
  const int rpp = rows_per_pass(g, hot_unroll(g));
  const Tile t = choose_tile(p.B, p.H, p.G, p.P, rpp, info.sms, smem, int64_t(HOT_PASSES) * rpp);
  p.stages = hot_stages(smem(t.nh, t.np), info.smem_per_sm, HOT_BLOCKS_PER_SM);
  const LaunchCfg c = config(fn, p, t, smem(t.nh, t.np) + p.stages * STAGE_BYTES, exec, g.vpl, info);
  dispatch(fn, pool.state.dtype, step.x.dtype,
           [&]<DType SD, DType AD>() { kern::launch_replay<SD, AD>(p, c); });
  launch_cursor(fn, p, Mode::step, exec);
}

void commit(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& num_accepted,
            const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_commit";
  cuda_util::require_supported_device(fn);
  Params p;
  set_dims(p, d);
  p.status = exec.device_status;
  set_slot(p, slot, pad);
  set_pool(p, pool);
  set_accepted(p, num_accepted);
  launch_cursor(fn, p, Mode::commit, exec);
}

void materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_materialize";
  cuda_util::require_supported_device(fn);
  if (d.B == 0) return;
  Params p;
  set_dims(p, d);
  p.mode = Mode::materialize;
  p.status = exec.device_status;
  set_slot(p, slot, pad);
  set_pool(p, pool);
  p.out = out.data;
  p.out_dtype = out.dtype;
  p.out_s = out.stride[0]; p.out_h = out.stride[1]; p.out_p = out.stride[2];
  launch_fold_kernel(fn, p, pool, exec);
}

void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Dims& d,
           const Exec& exec) {
  const char* fn = "mamba2_flush";
  cuda_util::require_supported_device(fn);
  if (d.B == 0) return;
  Params p;
  set_dims(p, d);
  p.mode = Mode::flush;
  p.status = exec.device_status;
  set_slot(p, slot, pad);
  set_pool(p, pool);
  launch_fold_kernel(fn, p, pool, exec);
  launch_cursor(fn, p, Mode::flush, exec);
  if (pool.read_copy.defined()) dual_repack(fn, p, pool, pool.ring_x.dtype, exec);
}

}  // namespace replayssm::mamba2::cuda

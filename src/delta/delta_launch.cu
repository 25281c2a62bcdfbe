// Launchers of the delta CUDA backend (replayssm::delta::cuda): views of the
// validated arguments, tile choices (heuristics.h), one dispatch switch over
// (state dtype, family). Stream-ordered, no host synchronisation and no
// allocation, so every call can be captured in a CUDA graph. Indices that
// only the device sees are checked in the kernels (Exec::device_status).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "core/check.h"
#include "core/eager.h"
#include "core/workspace.h"
#include "cuda/common.cuh"
#include "delta/backend.h"
#include "delta/heuristics.h"
#include "delta/kernels.h"
#include "delta/params.h"
#include "delta/decode1.cuh"
#include "delta/dual_fold.cuh"
#include "delta/dual_fold_mma.cuh"
#include "delta/recurrent.cuh"
#include "delta/replay.cuh"
#include "delta/replay1.cuh"
#include "delta/replay1p.cuh"
#include "quant/backend.h"

namespace replayssm::delta::cuda_impl {

// Cursor updates (one thread per row), after the data kernels of a call.
// After a replay step it is that kernel's programmatic dependent: its launch
// overlaps the step's tail and it waits for the step's grid (which reads the
// cursors) before touching them; otherwise the wait returns at once.
__global__ void delta_cursor_kernel(CursorArgs a) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= a.n) return;
  const int64_t s = idx_at(a.slot, b);
  if (s == a.pad) return;
  if (s < 0 || s >= a.S) {
    cuda_util::report(a.status, STATUS_BAD_SLOT);
    return;
  }
  int32_t* p = a.rings.cur + s * a.rings.c0;
  RingCursor c = cursor_at(a.rings, s);
  if (a.op == CUR_PREFILL) {
    c = RingCursor{c.start >= 0 && c.start < a.rings.R ? c.start : 0, 0, 0};
  } else {
    if (!cursor_ok(a.rings, c)) {
      cuda_util::report(a.status, STATUS_RING_OVERFLOW);
      return;
    }
    if (a.op == CUR_COMMIT) {
      if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) {
        cuda_util::report(a.status, STATUS_BAD_ACCEPTED);
        return;
      }
    } else if (a.op == CUR_FLUSH) {
      if (c.pending != 0) return;  // reported by the fold kernel
      c.start = ring_pos(c.start, c.count, a.rings.R);
      c.count = 0;
    } else {  // CUR_STEP / CUR_EAGER; errors were reported by the step kernel
      if (a.acc.p) {
        if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) return;
      } else if (c.pending != 0) {
        return;
      }
      if (a.op == CUR_EAGER) {
        c = RingCursor{ring_pos(c.start, c.count, a.rings.R), 0, 0};  // folded, the token too
      } else {
        c = ring_plan_step(c, a.T, a.rings.L, a.rings.R).next;
        if (a.commit_all) ring_commit(c, a.T);
      }
    }
  }
  p[0] = c.start;
  p[a.rings.c1] = c.count;
  p[2 * a.rings.c1] = c.pending;
}

}  // namespace replayssm::delta::cuda_impl

namespace replayssm::delta::cuda {
namespace {

using namespace cuda_impl;

bool is_kda(const Dims& d) { return d.family == DeltaFamily::kda; }

// Per-token input view: `lead` leading dims (2 for steps [B, T, ...], 1 for
// prefills [tokens, ...], whose b stride is 0).
Act act_of(const Tensor& t, int lead) {
  Act a;
  a.p = t.data;
  a.dt = t.dtype;
  if (lead == 2) {
    a.sb = t.stride[0];
    a.st = t.stride[1];
    a.sh = t.ndim > 2 ? t.stride[2] : 0;
  } else {
    a.sb = 0;
    a.st = t.stride[0];
    a.sh = t.ndim > 1 ? t.stride[1] : 0;
  }
  return a;
}
Out out_of(const Tensor& t, int lead) {
  const Act a = act_of(t, lead);
  return Out{t.data, t.dtype, a.sb, a.st, a.sh};
}
Index index_of(const Tensor& t) {
  Index x;
  x.p = t.data;
  x.dt = t.dtype;
  x.s0 = t.ndim > 0 ? t.stride[0] : 0;
  x.s1 = t.ndim > 1 ? t.stride[1] : 0;
  return x;
}

TokenArgs tokens_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                    const Tensor& beta, const Tensor& A_log, const Tensor& dt_bias, const Tensor& o,
                    const DeltaGating& gating, const Dims& d, int lead) {
  TokenArgs a;
  a.q = act_of(q, lead);
  a.k = act_of(k, lead);
  a.v = act_of(v, lead);
  a.g = act_of(g, lead);
  a.beta = act_of(beta, lead);
  a.o = out_of(o, lead);
  a.raw_gate = gating.raw_gate;
  a.raw_beta = gating.raw_beta;
  a.l2norm = gating.l2norm_qk;
  a.q_scale = gating.q_scale != 0.f ? gating.q_scale : float(1.0 / std::sqrt(double(d.K)));
  if (gating.raw_gate) {
    a.A_log = static_cast<const float*>(A_log.data);
    a.sA = A_log.stride[0];
    if (dt_bias.defined()) {
      a.dt_bias = static_cast<const float*>(dt_bias.data);
      a.sdb = dt_bias.stride[0];
    }
  }
  a.H = int(d.H);
  a.HV = int(d.HV);
  a.G = int(d.HV / d.H);
  a.K = int(d.K);
  a.V = int(d.V);
  return a;
}
TokenArgs tokens_of(const DeltaStep& s, const Dims& d) {
  return tokens_of(s.q, s.k, s.v, s.g, s.beta, s.A_log, s.dt_bias, s.o, s.gating, d, 2);
}
TokenArgs tokens_of(const DeltaPrefill& p, const Dims& d) {
  return tokens_of(p.q, p.k, p.v, p.g, p.beta, p.A_log, p.dt_bias, p.o, p.gating, d, 1);
}

StateView state_of(const Tensor& t) { return StateView{t.data, t.stride[0], t.stride[1], t.stride[2]}; }

Rings rings_of(const DeltaPool& p, const Dims& d) {
  Rings r;
  if (!p.ring_d.defined()) return r;
  r.d = p.ring_d.data;
  r.d_dt = p.ring_d.dtype;
  r.d0 = p.ring_d.stride[0]; r.d1 = p.ring_d.stride[1]; r.d2 = p.ring_d.stride[2];
  r.k = p.ring_k.data;
  r.k_dt = p.ring_k.dtype;
  r.k0 = p.ring_k.stride[0]; r.k1 = p.ring_k.stride[1]; r.k2 = p.ring_k.stride[2];
  r.ks = static_cast<float*>(p.ring_ks.data);
  r.ks0 = p.ring_ks.stride[0]; r.ks1 = p.ring_ks.stride[1]; r.ks2 = p.ring_ks.stride[2];
  r.g = static_cast<float*>(p.ring_g.data);
  r.g0 = p.ring_g.stride[0]; r.g1 = p.ring_g.stride[1]; r.g2 = p.ring_g.stride[2];
  r.cur = static_cast<int32_t*>(p.cursor.data);
  r.c0 = p.cursor.stride[0]; r.c1 = p.cursor.stride[1];
  r.R = int(d.R);
  r.L = int(d.L);
  return r;
}

// Limits of the register-row layout and the grid, checked before any launch.
void check_layout(const char* fn, const Tensor& state, const Dims& d, int64_t grid_z) {
  const int64_t vec = 16 / int64_t(dtype_size(state.dtype));
  check::require(d.K <= MAX_K, fn, "state", "the cuda backend supports K <= " + std::to_string(MAX_K) +
                 ", got " + std::to_string(d.K));
  check::require(d.K % vec == 0, fn, "state", "the cuda backend needs K to be a multiple of " +
                 std::to_string(vec) + " (16-byte rows), got " + std::to_string(d.K));
  check::require(grid_z <= 65535, fn, "slot", "the cuda backend handles at most 65535 rows per call");
}

int sm_count() { return cuda_util::device_sm_count(132); }

// The current device's peak memory bandwidth, GB/s (memory clock × bus
// width, double data rate); 0 when the driver does not say.
double peak_gbps() { return cuda_util::device_peak_gbps(); }

Launch launch_of(const char* fn, unsigned x, unsigned y, unsigned z, int threads, size_t smem, const Exec& e) {
  Launch l{{x, y, z}, threads, smem, reinterpret_cast<CUstream_st*>(e.stream)};
  l.fn = fn;
  return l;
}

using cuda_util::env_int;

// Whether a T = 1 replay step is eager (run_eager; core/eager.h with
// heuristics.h's EAGER_MAX_ROWS / EAGER_MAX_BYTES).
bool eager(const Dims& d, DType state) {
  return eager_step(d.B, d.HV * d.V * d.K * int64_t(dtype_size(state)), EAGER_MAX_ROWS, EAGER_MAX_BYTES);
}

// The one dispatch switch: (state dtype, family) → typed launch.
template <template <DType, bool> class Op, class Args>
void dispatch(DType state, bool kda, const Args& a, const Launch& l) {
  switch (state) {
    case DType::f32: kda ? Op<DType::f32, true>::run(a, l) : Op<DType::f32, false>::run(a, l); break;
    case DType::bf16: kda ? Op<DType::bf16, true>::run(a, l) : Op<DType::bf16, false>::run(a, l); break;
    case DType::f16: kda ? Op<DType::f16, true>::run(a, l) : Op<DType::f16, false>::run(a, l); break;
    default: break;  // rejected by validation
  }
}
template <DType SD, bool KDA> struct RecOp { static void run(const RecArgs& a, const Launch& l) { launch_recurrent<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct Decode1Op { static void run(const RecArgs& a, const Launch& l) { launch_decode1<SD, KDA>(a, l); } };
template <bool TWO> struct Decode1Eager {  // TWO: the grid fits two resident blocks per SM
  template <DType SD, bool KDA> struct Op { static void run(const RecArgs& a, const Launch& l) { launch_decode1_eager<SD, KDA>(a, l, TWO); } };
};
template <DType SD, bool KDA> struct ReplayOp { static void run(const ReplayArgs& a, const Launch& l) { launch_replay<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct ReplayMmaOp { static void run(const ReplayArgs& a, const Launch& l) { launch_replay_mma<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct Replay1Op { static void run(const ReplayArgs& a, const Launch& l) { launch_replay1<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct Replay1BulkOp { static void run(const ReplayArgs& a, const Launch& l) { launch_replay1_bulk<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct Replay1POp { static void run(const ReplayArgs& a, const Launch& l) { launch_replay1p<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct FoldOp { static void run(const FoldArgs& a, const Launch& l) { launch_fold<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct DualFoldOp { static void run(const DualArgs& a, const Launch& l) { launch_dual_fold<SD, KDA>(a, l); } };
template <DType SD, bool KDA> struct DualFoldMmaOp { static void run(const DualArgs& a, const Launch& l) { launch_dual_fold_mma<SD, KDA>(a, l); } };

void launch_cursor(const CursorArgs& a, const Exec& exec, bool after_step = false) {
  const int threads = 128;
  const dim3 grid(unsigned((a.n + threads - 1) / threads));
  const cudaStream_t st = cuda_util::stream_of(exec);
  // (a failed launch is reported by the caller's check_launch: cudaGetLastError)
  if (after_step) (void)cuda_util::launch_dependent(delta_cursor_kernel, grid, dim3(threads), 0, st, a);
  else delta_cursor_kernel<<<grid, threads, 0, st>>>(a);
}

// The cursor kernel alone for an operation on the batch's slots (prefill,
// flush, commit; acc: the commit's accepted counts, else undefined).
void run_cursor_op(const char* fn, int op, const DeltaPool& pool, const Tensor& slot, int64_t pad,
                   const Tensor& acc, const Dims& d, const Exec& exec) {
  CursorArgs c;
  c.rings = rings_of(pool, d);
  c.slot = index_of(slot);
  c.pad = pad;
  c.S = d.S;
  c.acc = index_of(acc);
  c.op = op;
  c.n = int(d.B);
  c.status = exec.device_status;
  launch_cursor(c, exec);
  cuda_util::check_launch(fn);
}

// Baseline recurrence launch (decode, snapshot, prefill).
void run_recurrent(const char* fn, RecArgs& a, const Tensor& state, const Dims& d, int64_t rows,
                   const Exec& exec) {
  a.st = state_of(state);
  a.lpr = lanes_per_row(d.K);
  a.status = exec.device_status;
  if (a.mode == REC_DECODE && a.T == 1) {  // staged streaming kernel (decode1.cuh)
    const int nch = int(dtype_size(state.dtype));  // 16-byte chunks per 16-element lane share
    const int64_t G = d.HV / d.H;
    const DecodeTile t = decode1_tile(d.B, d.H, G, d.V, a.lpr, nch, sm_count(), is_kda(d),
                                      cuda_util::env_int("REPLAYSSM_D1_ROUNDS", decode1_stage_rounds(nch)));
    a.nh = t.nh;
    a.vt = t.vt;
    a.vtiles = int((d.V + t.vt - 1) / t.vt);
    a.kpb = t.kpb;
    const int rpp = DECODE1_THREADS / a.lpr;
    auto smem_of = [&](const DecodeTile& u) {  // bytes of a tile's block (decode1_layout)
      const int rbm = u.nh * u.vt;
      return size_t(decode1_layout(is_kda(d), int(d.K), u.nh, rbm, nch, (rbm + rpp - 1) / rpp, u.kpb).total) * 4;
    };
    const size_t smem = smem_of(t);
    Launch l = launch_of(fn, unsigned((G * t.kpb / t.nh) * a.vtiles), unsigned(d.H / t.kpb), unsigned(rows),
                         DECODE1_THREADS, smem, exec);
    // The last r rows (heuristics.h DECODE1_TAIL_ROWS; REPLAYSSM_D1_TAIL_ROWS
    // = r for measurements, 0 none) in smaller tiles at the end of a 1-D
    // grid (decode1.cuh TAIL): the tile of REPLAYSSM_D1_TAIL_ROUNDS stage
    // rounds (default 1), its rows of V per head cut to REPLAYSSM_D1_TAIL_VT
    // when that is smaller.
    const int64_t tr = cuda_util::env_int("REPLAYSSM_D1_TAIL_ROWS", DECODE1_TAIL_ROWS);
    if (tr > 0 && tr < rows) {
      DecodeTile u = decode1_tile(d.B, d.H, G, d.V, a.lpr, nch, sm_count(), is_kda(d),
                                  cuda_util::env_int("REPLAYSSM_D1_TAIL_ROUNDS", 1));
      const int tvt = cuda_util::env_int("REPLAYSSM_D1_TAIL_VT", 0);
      if (tvt > 0 && tvt % rpp == 0 && tvt < u.vt) u.vt = tvt;
      a.tb0 = int(rows - tr);
      a.tnh = u.nh;
      a.tvt = u.vt;
      a.tvtiles = int((d.V + u.vt - 1) / u.vt);
      a.tkpb = u.kpb;
      a.big = l.grid[0] * l.grid[1] * unsigned(a.tb0);
      const int64_t small = (G * u.kpb / u.nh) * a.tvtiles * (d.H / u.kpb) * tr;
      l.grid[0] = unsigned(a.big + small);
      l.grid[1] = l.grid[2] = 1;
      l.smem = std::max(l.smem, smem_of(u));
    }
    dispatch<Decode1Op>(state.dtype, is_kda(d), a, l);
    cuda_util::check_launch(fn);
    return;
  }
  const int rb = rows_per_block(REC_THREADS, REC_ROWS, a.lpr);
  const int fold_L = a.rings.d ? a.rings.L : 0;
  const size_t smem = size_t(rec_layout(is_kda(d), int(d.K), a.tc, fold_L, rb).total) * 4;
  const Launch l =
      launch_of(fn, unsigned((d.V + rb - 1) / rb), unsigned(d.HV), unsigned(rows), REC_THREADS, smem, exec);
  dispatch<RecOp>(state.dtype, is_kda(d), a, l);
  cuda_util::check_launch(fn);
}

}  // namespace

TokenArgs step_tokens(const DeltaStep& step, const Dims& d) { return tokens_of(step, d); }

void decode(const DeltaStep& step, const Tensor& state, const Dims& d, const Exec& exec) {
  const char* fn = "delta_decode";
  cuda_util::require_supported_device(fn);
  check_layout(fn, state, d, d.B);
  RecArgs a;
  a.in = tokens_of(step, d);
  a.mode = REC_DECODE;
  a.slot = index_of(step.slot);
  a.pad = step.pad_slot_id;
  a.S = d.S;
  a.T = int(d.T);
  a.tc = int(std::min<int64_t>(d.T, REC_TOKEN_CHUNK));
  run_recurrent(fn, a, state, d, d.B, exec);
}

void snapshot_decode(const DeltaStep& step, const Tensor& state, const Tensor& state_indices,
                     const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  const char* fn = "delta_snapshot_decode";
  cuda_util::require_supported_device(fn);
  check_layout(fn, state, d, d.B);
  RecArgs a;
  a.in = tokens_of(step, d);
  a.mode = REC_SNAPSHOT;
  a.sidx = index_of(state_indices);
  if (num_accepted.defined()) a.acc = index_of(num_accepted);
  a.pad = step.pad_slot_id;
  a.S = d.S;
  a.T = int(d.T);
  a.tc = int(std::min<int64_t>(d.T, REC_TOKEN_CHUNK));
  run_recurrent(fn, a, state, d, d.B, exec);
}

void prefill(const DeltaPrefill& p, const DeltaPool& pool, const Dims& d, const Exec& exec) {
  const char* fn = "delta_prefill";
  cuda_util::require_supported_device(fn);
  check_layout(fn, pool.state, d, d.B);
  RecArgs a;
  a.in = tokens_of(p, d);
  a.mode = REC_PREFILL;
  a.slot = index_of(p.slot);
  a.pad = p.pad_slot_id;
  a.S = d.S;
  a.cu = index_of(p.cu_seqlens);
  if (p.initial.defined()) a.init = index_of(p.initial);
  if (pool.ring_d.defined() && p.initial.defined()) a.rings = rings_of(pool, d);
  a.tc = REC_TOKEN_CHUNK;
  run_recurrent(fn, a, pool.state, d, d.B, exec);
  if (pool.cursor.defined()) run_cursor_op(fn, CUR_PREFILL, pool, p.slot, p.pad_slot_id, Tensor{}, d, exec);
}

namespace {

// The read copy of a dual pool as the replay kernels' state; `before` runs
// after every check of the step and before its first launch (the dual fold).
struct DualRead {
  const Tensor* copy;
  QuantLayout lay;
  std::function<void()> before;
};

RecRing rec_of(const Tensor& t) {
  RecRing r;
  r.p = t.data;
  r.dt = t.dtype;
  r.s0 = t.stride[0], r.s1 = t.stride[1], r.s2 = t.stride[2];
  return r;
}

// The T = 1 replay's bulk-copy stream (replay1.cuh, BULK) needs K = 128 and
// every block's rows one contiguous, 16-byte aligned run of the state (or
// copy): rows of K elements back to back, and whole value heads back to back
// when a block spans several.
bool replay1_bulk_fits(const StateView& st, int64_t state_size, const ReplayTile& tile, const Dims& d) {
  const int64_t vec = 16 / state_size;
  return d.K == R1B_K && st.s2 == d.K && (tile.nh == 1 || (tile.vt == d.V && st.s1 == d.V * d.K)) &&
         reinterpret_cast<uintptr_t>(st.p) % 16 == 0 && st.s0 % vec == 0 && st.s1 % vec == 0;
}

// An fp8 / nvfp4 read copy as the decoding kernels see it: their format flag
// and the geometry of a tile's scales.
int packed_qf(const QuantLayout& l) { return l.format == ReadFormat::fp8_e4m3 ? QF_FP8 : QF_NVFP4; }
QuantGeom packed_geom(const QuantLayout& l) { return QuantGeom{l.scale_offset, l.scale_row_bytes, l.tensor_scale_offset}; }

// The same stream over a packed fp8 / nvfp4 copy (replay1.cuh, QF with BULK):
// K = 128, at most 128 rows of a head per block, value tiles of equal size
// (each sweep expects the bytes of tile.vt rows: a shorter last tile left its
// mbarrier incomplete and the kernel hung, V = 40 split at batch 3), and every
// copied run (the block's codes and scales of a head, the nvfp4 tensor scale)
// 16-byte aligned: tiles start on 16 bytes and quant_layout aligns its
// regions to 16.
bool replay1_qbulk_fits(const StateView& st, const ReplayTile& tile, const Dims& d, const QuantGeom& q) {
  return d.K == R1B_K && tile.vt <= R1Q_MAX_ROWS && d.V % tile.vt == 0 && (tile.vt * q.scale_row_bytes) % 16 == 0 &&
         q.scale_offset % 16 == 0 && (q.tensor_scale_offset < 0 || q.tensor_scale_offset % 16 == 0) &&
         reinterpret_cast<uintptr_t>(st.p) % 16 == 0 && st.s0 % 16 == 0 && st.s1 % 16 == 0;
}

// A record ring whose elements can be read in aligned groups of 4 (last:
// its last extent).
bool vec4(const Tensor& t, int64_t last) {
  const int64_t e = int64_t(dtype_size(t.dtype));
  bool ok = t.defined() && reinterpret_cast<uintptr_t>(t.data) % uintptr_t(4 * e) == 0 && last % 4 == 0;
  for (int i = 0; ok && i + 1 < t.ndim; ++i) ok = t.stride[i] % 4 == 0;
  return ok;
}

// The rows of the tensor-core kernels (the speculative stream of replay.cuh,
// the dual fold of dual_fold_mma.cuh): K = 128, an unpacked state (or bf16 /
// f16 copy) with 16-byte aligned rows, and tiles of whole 16-row runs of one
// value head (V % 16 == 0).
static_assert(FOLD_MMA_K == REPLAY_MMA_K, "one key dimension for the tensor-core row layout");
bool mma_rows_fit(const StateView& st, int64_t state_size, const Dims& d) {
  const int64_t vec = 16 / state_size;
  return d.K == REPLAY_MMA_K && d.V % 16 == 0 && reinterpret_cast<uintptr_t>(st.p) % 16 == 0 && st.s0 % vec == 0 &&
         st.s1 % vec == 0 && st.s2 % vec == 0;
}
// The speculative step's tensor-core stream: T <= 8 on top.
bool replay_mma_fits(const StateView& st, int64_t state_size, int T, const Dims& d) {
  return T >= 2 && T <= 8 && mma_rows_fit(st, state_size, d);
}

// replay.cuh REC16: the KDA tensor-core kernel takes its old records' key, d
// and gate rows (K = V = 128) by 16-byte cp.async into its operand region:
// one value head per block, 16-byte aligned rows, and the staged keys, d rows
// and key scales of L records within REPLAY_MMA_REC_BYTES (L <= 21 with bf16
// keys and fp32 d). REPLAYSSM_SPEC_REC16=0 turns it off (measurements).
bool rec16_fits(const DeltaPool& pool, const ReplayTile& tile, const Dims& d) {
  auto rows16 = [](const Tensor& t) {
    const int64_t e = int64_t(dtype_size(t.dtype));
    bool ok = t.defined() && reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
    for (int i = 0; ok && i + 1 < t.ndim; ++i) ok = (t.stride[i] * e) % 16 == 0;
    return ok;
  };
  if (!is_kda(d) || d.K != REPLAY_MMA_K || d.V != REPLAY_MMA_K || tile.nh != 1 || tile.vt != d.V) return false;
  if (!rows16(pool.ring_k) || !rows16(pool.ring_d) || !rows16(pool.ring_g)) return false;
  const int64_t bytes =
      d.L * (d.K * int64_t(dtype_size(pool.ring_k.dtype)) + d.V * int64_t(dtype_size(pool.ring_d.dtype)) + 4);
  return bytes <= REPLAY_MMA_REC_BYTES && env_int("REPLAYSSM_SPEC_REC16", 1) != 0;
}

// The T = 1 replay launch (replay1.cuh): its tile (replay_tile, shared
// memory of the staged stream with all L d records at REPLAY1_SMEM_CAP), its
// d records in shared memory, its stream and shared memory. A long ring whose
// whole tile (GDN: a key head) would lose the block a resident slot per SM
// keeps the tile with fewer d records in shared memory (replay1_ld) when the
// tile streams by bulk copies.
struct Replay1Plan {
  ReplayTile tile;
  int ld = 0;
  bool bulk = false, qbulk = false;
  size_t smem = 0;
};
// The bytes a replay step streams (its tile's blocks-per-SM target,
// heuristics.h replay1_tile_bps): ss per element (state or 16-bit copy), 1
// for fp8, ½ for nvfp4.
int64_t streamed_bytes(const Dims& d, int qf, int64_t ss) {
  const int64_t elems = d.B * d.HV * d.K * d.V;
  return qf == QF_NONE ? elems * ss : qf == QF_FP8 ? elems : elems / 2;
}

// The T > 1 replay launch (replay.cuh): tensor-core tiles (value-head rows in
// multiples of 16, rows per pass 16) where replay_mma_fits, aiming at the
// T = 1 rule's blocks per SM (heuristics.h replay1_tile_bps: one per SM at
// small batches; packed copies spec_packed_tile_bps; perf_notes_delta.md,
// "speculative tiles at small batches by default"); REPLAYSSM_SPEC_TILE_BPS
// sets them instead (tests, measurements).
struct SpecPlan {
  ReplayTile tile;
  bool mma = false, a3 = false;
  size_t smem = 0;
};
// replay.cuh A3: KDA's fp32 tensor-core kernel at three blocks per SM, its
// stages over the preparation's arrays (replay_layout a3), where the tile is
// one whole head of 128 rows (a tile per warp) and three blocks' shared
// memory (with the 1 KiB the device reserves per block, checked in
// spec_plan) fits an SM: L + T up to 24 at K = 128 (L = 16, T <= 8).
// By default from T = SPEC_A3_MIN_T on (heuristics.h); REPLAYSSM_SPEC_A3=1 / 0
// sets it (tests, measurements). These are the shape and switch conditions;
// spec_plan adds the fit.
bool spec_a3_shape(const SpecPlan& p, DType sd, const Dims& d) {
  return is_kda(d) && p.mma && sd == DType::f32 && p.tile.nh == 1 && p.tile.vt == REPLAY_MMA_K &&
         d.V == REPLAY_MMA_K && env_int("REPLAYSSM_SPEC_A3", d.T >= SPEC_A3_MIN_T ? 1 : 0) != 0;
}
SpecPlan spec_plan(const StateView& st, int qf, DType sd, const Dims& d, int sms, int smem_per_sm) {
  const bool kda = is_kda(d);
  const int T = int(d.T);
  SpecPlan p;
  p.mma = qf == QF_NONE && replay_mma_fits(st, int64_t(dtype_size(sd)), T, d);
  auto smem_of = [&](const ReplayTile& t, bool a3) {
    return replay_layout(kda, int(d.K), T, int(d.L), t.nh, t.nh * t.vt, p.mma, a3).bytes +
           (p.mma ? replay_mma_extra_bytes(a3) : 0);
  };
  const int64_t elems = d.B * d.HV * d.K * d.V;
  const int rule = qf == QF_NONE ? replay1_tile_bps(elems * int64_t(dtype_size(sd)), sms) : spec_packed_tile_bps(elems, sms);
  const int bps = env_int("REPLAYSSM_SPEC_TILE_BPS", rule);
  p.tile = replay_tile(d.family, d.B, d.H, d.HV / d.H, d.V, p.mma ? REPLAY_THREADS / 16 : lanes_per_row(d.K), sms,
                       [&](const ReplayTile& t) { return smem_of(t, false); }, REPLAY_SMEM_CAP, std::max(1, bps));
  p.smem = size_t(smem_of(p.tile, false));
  if (spec_a3_shape(p, sd, d)) {
    const int64_t a3 = smem_of(p.tile, true);
    if (3 * (a3 + 1024) <= smem_per_sm) {
      p.a3 = true;
      p.smem = size_t(a3);
    }
  }
  return p;
}

Replay1Plan replay1_plan(const StateView& st, const QuantGeom& qg, int qf, DType sd, const Dims& d, int sms) {
  const bool kda = is_kda(d);
  const int64_t G = d.HV / d.H;
  const int lpr = lanes_per_row(d.K), rpp = REPLAY1_THREADS / lpr, L = int(d.L);
  // 16-byte stage words per 16-element lane share (fp8 / nvfp4: one per 8 elements)
  const int nch = qf == QF_NONE ? int(dtype_size(sd)) : 2;
  const int64_t ss = int64_t(dtype_size(sd));
  auto smem_of = [&](const ReplayTile& t) {
    const int rbm = t.nh * t.vt;
    return replay1_layout(kda, int(d.K), L, t.nh, rbm, replay1_dt_floats(L, L, rbm, 0), nch, (rbm + rpp - 1) / rpp)
               .total * 4;
  };
  auto bulk_fits = [&](const ReplayTile& t) { return qf == QF_NONE && replay1_bulk_fits(st, ss, t, d); };
  auto qbulk_fits = [&](const ReplayTile& t) { return qf != QF_NONE && replay1_qbulk_fits(st, t, d, qg); };
  // The launch's shared memory with ld d records in it (bulk streams: their stages).
  auto launch_smem = [&](const ReplayTile& t, int ld) {
    const int rbm = t.nh * t.vt;
    const bool bk = bulk_fits(t), qbk = qbulk_fits(t);
    const int64_t bulk_floats = bk    ? r1b_stage_floats(kda, int(ss), rbm)
                                : qbk ? r1q_stage_floats(r1q_sweep_bytes(qf == QF_NVFP4, t.vt, qg.scale_row_bytes), t.nh)
                                      : 0;
    // (a wide flush stages its weights in DT for GDN, in the gates' region for KDA)
    const int64_t dt = replay1_dt_floats(L, ld, rbm, bk && !kda ? r1b_sweep_rows(kda, int(ss)) : 0);
    return replay1_layout(kda, int(d.K), L, t.nh, rbm, dt, nch, (rbm + rpp - 1) / rpp, bulk_floats).total * 4;
  };
  Replay1Plan p;
  const int bps = std::max(1, env_int("REPLAYSSM_R1_TILE_BPS", replay1_tile_bps(streamed_bytes(d, qf, ss), sms)));
  p.tile = replay_tile(d.family, d.B, d.H, G, d.V, lpr, sms, smem_of, REPLAY1_SMEM_CAP, bps);
  p.ld = L;
  const ReplayTile ideal = replay_tile(d.family, d.B, d.H, G, d.V, lpr, sms, [](const ReplayTile&) { return int64_t(0); },
                                       REPLAY1_SMEM_CAP, bps);
  const int64_t budget = replay1_smem_budget(kda || qf != QF_NONE);
  if ((bulk_fits(ideal) || qbulk_fits(ideal)) &&
      (ideal.nh != p.tile.nh || ideal.vt != p.tile.vt || launch_smem(p.tile, L) > budget)) {
    const int ld = replay1_ld(L, [&](int c) { return launch_smem(ideal, c); }, budget);
    if (ld < L) {
      p.tile = ideal;
      p.ld = ld;
    }
  }
  p.bulk = bulk_fits(p.tile);
  p.qbulk = qbulk_fits(p.tile);
  p.smem = size_t(launch_smem(p.tile, p.ld));
  return p;
}

// A ring whose records bulk copies can read (replay1p.cuh): 16-byte aligned
// data and outer strides, contiguous last extent, `bytes` per record a
// multiple of 16.
bool bulk_records(const Tensor& t, int64_t bytes) {
  const int64_t e = int64_t(dtype_size(t.dtype));
  bool ok = t.defined() && reinterpret_cast<uintptr_t>(t.data) % 16 == 0 && bytes % 16 == 0 && t.stride[t.ndim - 1] == 1;
  for (int i = 0; ok && i + 1 < t.ndim; ++i) ok = (t.stride[i] * e) % 16 == 0;
  return ok;
}

// The persistent T = 1 step (replay1p.cuh): a preparation kernel of one
// warp per item (row, key head), then one stream block per SM over the
// items, each a whole key head (GDN: its G value heads) of K = 128 rows
// contiguous in the state, records readable by bulk copies (GDN's d
// records of a key head contiguous), L <= 32, and by default (heuristics.h)
// a state of enough bytes per SM (r1p_by_default: 16-bit GDN 1.75 MiB,
// 16-bit KDA 1 MiB, fp32 KDA 1.375 MiB, fp32 GDN never; below the H200's
// bandwidth class neither fp32 KDA nor 16-bit GDN of G >= 3, and 16-bit
// GDN of G = 2 from 10 items per SM) or a dual step's read copy from 12
// items per SM (r1p_dual_by_default; below that class not GDN's bf16 /
// f16 copies of G >= 3). The stream's stages
// fill the shared memory its NB result buffers and flush area (none for a
// dual step) leave (at most R1P_MAX_STAGES; for 16-bit states and packed
// copies on devices of less bandwidth than the H200 at most heuristics.h's
// r1p_stage_cap; KDA's, but on nvfp4 copies, at most R1P_KDA_STAGES with
// R1P_KDA_RESULT_BUFFERS result buffers).
// REPLAYSSM_R1P=0 never takes it; =1 whenever it fits, a captured step
// without device scratch then being an Error naming `workspace` (tests at
// small batches); =2 whenever it fits, such a step taking the blocks as by
// default (tests); REPLAYSSM_R1P_NST, REPLAYSSM_R1P_NB and
// REPLAYSSM_R1P_CHUNK override its stages, result buffers and items per
// claim (measurements).
struct Replay1PPlan {
  bool use = false;
  int nst = 0, nb = 0, chunk = 1, nsw = 0, threads = 0;
  bool lanes_copy = false;
  bool need_scratch = false;  // REPLAYSSM_R1P=1: no fallback to the blocks under capture
  unsigned grid = 0, prep_grid = 0;
  size_t smem = 0, prep_smem = 0;
  int64_t ps = 0;    // payload stride (floats)
  size_t bytes = 0;  // device scratch
};
// With `dual` the state is a dual pool's read copy (`qf`: an fp8 / nvfp4
// copy of geometry `qg`, a sweep per value head as replay1_qbulk_fits; a bf16
// / f16 copy as a 16-bit state): the preparation waits for the dual fold on a
// flushing row's item only.
Replay1PPlan replay1p_plan(const StateView& st, const DeltaPool& pool, DType sd, int qf, const QuantGeom& qg,
                           bool dual, const Dims& d, int sms, double gbps) {
  Replay1PPlan p;
  const int mode = env_int("REPLAYSSM_R1P", -1);
  const bool kda = is_kda(d);
  const int64_t G = d.HV / d.H, rb = G * d.V, ss = int64_t(dtype_size(sd));
  const int64_t dsz = int64_t(dtype_size(pool.ring_d.dtype)), ksz = int64_t(dtype_size(pool.ring_k.dtype));
  const bool packed = qf != QF_NONE;
  if (mode == 0 || d.K != R1B_K || d.L > 32 || d.V % 4 != 0 ||
      !(packed ? replay1_qbulk_fits(st, ReplayTile{int(G), int(d.V)}, d, qg)
               : replay1_bulk_fits(st, ss, ReplayTile{int(G), int(d.V)}, d)))
    return p;
  if (!bulk_records(pool.ring_d, rb * dsz) || (G > 1 && pool.ring_d.stride[2] != d.V) ||
      !bulk_records(pool.ring_k, d.K * ksz) || (kda && !bulk_records(pool.ring_g, d.K * 4)))
    return p;
  const int64_t items = d.B * d.H;
  if (mode != 1 && mode != 2 &&
      !(dual ? r1p_dual_by_default(items, sms, kda, packed ? 1 : ss, G, gbps)
             : r1p_by_default(kda, ss, d.B * d.HV * d.V * d.K * ss, sms, gbps, G, items)))
    return p;
  const int warps = r1p_warps(kda, int(ss), dual);
  const int64_t sw = packed ? d.V : r1b_sweep_rows(kda, int(ss), warps);
  const int64_t swb = packed ? r1q_sweep_bytes(qf == QF_NVFP4, int(d.V), qg.scale_row_bytes) : sw * R1B_K * ss;
  const R1PRes rl = r1p_res(kda, int(d.K), int(d.L), int(G), int(rb));
  const bool kda_few = kda && qf != QF_NVFP4;  // heuristics.h R1P_KDA_STAGES
  const int nb = std::clamp(env_int("REPLAYSSM_R1P_NB", kda_few ? R1P_KDA_RESULT_BUFFERS : kda ? 8 : 6), 2, 16);
  const int64_t fixed = r1p_layout(rl, int(d.L), int(rb), int(dsz), swb, 0, nb, !dual).total * 4;
  int cap = r1p_stage_cap(swb, !packed && ss == 4, gbps, R1P_MAX_STAGES);
  if (kda_few) cap = std::min(cap, R1P_KDA_STAGES);
  const int nst = int(std::min<int64_t>(env_int("REPLAYSSM_R1P_NST", cap),
                                        std::min<int64_t>(R1P_MAX_STAGES, (227 * 1024 - fixed) / swb)));
  if (nst < 2) return p;
  p.use = true;
  p.need_scratch = mode == 1;
  p.nst = nst;
  p.nb = nb;
  // one item per claim (was GDN 2, KDA 4): B = 256 µs at 4 / 2 / 1, fp32
  // KDA 238.6 / 232.5 / 231.2, bf16 KDA 225.4 / 217.4 / 212.7; GDN HV64 bf16
  // at 2 / 1 239.6 / 237.2; the dual steps within 1 % (perf_notes_delta.md,
  // "items per claim")
  p.chunk = std::clamp(env_int("REPLAYSSM_R1P_CHUNK", 1), 1, R1P_MAX_CHUNK);
  p.nsw = int((rb + sw - 1) / sw);
  p.threads = r1p_threads(warps);
  p.lanes_copy = !packed && env_int("REPLAYSSM_R1P_LANES", 0) != 0;
  p.grid = unsigned(std::min<int64_t>((items + p.chunk - 1) / p.chunk, sms));
  p.smem = size_t(fixed + int64_t(nst) * swb);
  p.prep_grid = unsigned((items + P1_WARPS - 1) / P1_WARPS);
  p.prep_smem = size_t(P1_WARPS * p1_layout(kda, int(d.K), int(d.L), int(G)).total * 4);
  p.ps = rl.pay;
  p.bytes = size_t(r1p_scratch_bytes(items, rl));
  return p;
}

// The persistent step's scratch: the caller's workspace (device memory),
// else a buffer of the library per device and stream that only grows, its
// older buffers kept (a captured graph may hold them); it cannot grow while
// the stream is capturing: null (the caller takes replay1.cuh's blocks), or
// when `required` an error naming workspace (pass one, sized by
// delta_workspace_bytes, or run a step of that size before capturing).
void* replay1p_scratch(const char* fn, size_t bytes, const Exec& exec, bool required) {
  if (exec.workspace.data) {
    check_workspace_memory(fn, exec.workspace, bytes, "delta_workspace_bytes for this call");
    cudaPointerAttributes at{};
    const bool dev = cudaPointerGetAttributes(&at, exec.workspace.data) == cudaSuccess &&
                     (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged);
    (void)cudaGetLastError();
    check::require(dev, fn, "workspace", "the cuda backend needs device memory");
    return exec.workspace.data;
  }
  struct Buf {
    void* p = nullptr;
    size_t bytes = 0;
  };
  static std::mutex mu;
  static std::map<std::pair<int, void*>, Buf> bufs;
  int dev = 0;
  cuda_util::check(cudaGetDevice(&dev), fn, "workspace");
  std::lock_guard<std::mutex> lock(mu);
  Buf& b = bufs[{dev, exec.stream}];
  if (b.bytes < bytes) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    (void)cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(exec.stream), &cs);
    if (cs != cudaStreamCaptureStatusNone && !required) return nullptr;
    check::require(cs == cudaStreamCaptureStatusNone, fn, "workspace",
                   "the cuda replay step needs " + std::to_string(bytes) +
                       " bytes of device workspace and the stream is capturing: pass Exec::workspace " +
                       "(delta_workspace_bytes) or run the step once before capturing");
    void* p = nullptr;
    cuda_util::check(cudaMalloc(&p, bytes), fn, "workspace");
    b = Buf{p, bytes};  // the previous buffer stays allocated (captured graphs)
  }
  return b.p;
}

// Timeline stamps in mapped host memory, 16 per record (a replay1.cuh block,
// a replay1p.cuh item or a dual fold block) of the latest launch, written at
// exit to the file that the environment variable named in `t` gives (size_t
// count, then the records; scripts/r1_timeline.py, r1p_timeline.py,
// fold_timeline.py). Null when it is unset,
// when the launch has more than t.cap records, or when allocation fails.
struct TimelineDump {
  const char* path;
  size_t cap;
  unsigned long long* host = nullptr;
  size_t n = 0;
};
unsigned long long* timeline_stamps(TimelineDump& t, size_t records) {
  static TimelineDump* dumps[3] = {};  // its users, in the order of their first launch
  if (!t.path || records > t.cap) return nullptr;
  if (!t.host) {
    if (cudaHostAlloc(reinterpret_cast<void**>(&t.host), t.cap * 128, cudaHostAllocMapped) != cudaSuccess) {
      t.host = nullptr;
      t.path = nullptr;
      return nullptr;
    }
    if (!dumps[0])
      std::atexit([] {
        for (TimelineDump* d : dumps)
          if (FILE* f = d ? std::fopen(d->path, "wb") : nullptr) {
            std::fwrite(&d->n, sizeof(d->n), 1, f);
            std::fwrite(d->host, 128, d->n, f);
            std::fclose(f);
          }
      });
    for (TimelineDump*& d : dumps)
      if (!d) {
        d = &t;
        break;
      }
  }
  t.n = records;
  unsigned long long* dev = nullptr;
  return cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), t.host, 0) == cudaSuccess ? dev : nullptr;
}

// The cursor kernel of a replay step, the step's programmatic dependent.
void launch_step_cursor(const ReplayArgs& a, bool commit_all, const Dims& d, const Exec& exec, const char* fn,
                        int op = CUR_STEP) {
  CursorArgs c;
  c.rings = a.rings;
  c.slot = a.slot;
  c.pad = a.pad;
  c.S = d.S;
  c.acc = a.acc;
  c.op = op;
  c.commit_all = commit_all;
  c.T = a.T;
  c.n = int(d.B);
  c.status = exec.device_status;
  launch_cursor(c, exec, /*after_step=*/true);
  cuda_util::check_launch(fn);
}

// The T = 1 replay step at small batches, eager (decode1.cuh, EAGER): each
// row folds its committed records (after the fused commit) and its token into
// the checkpoint, read-update-write as the baseline decode, and its ring ends
// empty (the row's last block resets the cursor, cuda_util::row_counters;
// else the cursor kernel's CUR_EAGER after the step). Plain pools with commit_all only: a dual pool's copy
// would be repacked every step, and an uncommitted token cannot be folded.
// One value head per block (the fold vectors of one head in shared memory).
void run_eager(const char* fn, const ReplayArgs& ra, DType sd, const Dims& d, const Exec& exec) {
  RecArgs a;
  a.in = ra.in;
  a.st = ra.st;
  a.rings = ra.rings;
  a.mode = REC_DECODE;
  a.slot = ra.slot;
  a.pad = ra.pad;
  a.S = ra.S;
  a.acc = ra.acc;
  a.T = 1;
  a.lpr = ra.lpr;
  a.status = ra.status;
  a.ctr = cuda_util::row_counters(fn, d.B, exec.stream);
  const int nch = int(dtype_size(sd)), sms = sm_count();
  const bool kda = is_kda(d);
  const int64_t G = d.HV / d.H;
  const int vt = decode1_tile(d.B, d.H, G, d.V, a.lpr, nch, sms, kda, decode1_stage_rounds(nch)).vt;  // the baseline's rows per head
  a.nh = 1;
  a.kpb = 1;
  a.vt = vt;
  a.vtiles = int((d.V + vt - 1) / vt);
  const int rpp = DECODE1_THREADS / a.lpr;
  const size_t smem = size_t(decode1_layout(kda, int(d.K), 1, vt, nch, (vt + rpp - 1) / rpp, 1, int(d.L)).total) * 4;
  check::require(smem <= 227 * 1024, fn, "pool.L", "L too large for the cuda eager step's shared memory");
  const Launch l = launch_of(fn, unsigned(G * a.vtiles), unsigned(d.H), unsigned(d.B), DECODE1_THREADS, smem, exec);
  // Two resident blocks per SM leave the fold its registers (no spills) but
  // a grid beyond them would run in two waves (GDN HV64 fp32 B = 3: 13.6
  // against 10.5 µs, perf_notes_delta.md, "the eager instance's registers"):
  // then the baseline's three.
  const int64_t blocks = G * a.vtiles * d.H * d.B;
  if (blocks <= 2 * int64_t(sms)) dispatch<Decode1Eager<true>::Op>(sd, kda, a, l);
  else dispatch<Decode1Eager<false>::Op>(sd, kda, a, l);
  cuda_util::check_launch(fn);
  if (!a.ctr) launch_step_cursor(ra, true, d, exec, fn, CUR_EAGER);
}

// The replay step (data kernel + cursor kernel). With `dual`, the kernels
// read the copy: bf16 / f16 copies as plain state rows (tile strides),
// fp8 / nvfp4 through the decoding replay kernel (any T).
void run_replay(const char* fn, const DeltaStep& step, const DeltaPool& pool, const Tensor& num_accepted,
                bool commit_all, const Dims& d, const Exec& exec, const DualRead* dual) {
  ReplayArgs a;
  a.in = tokens_of(step, d);
  a.st = state_of(pool.state);
  a.rings = rings_of(pool, d);
  a.slot = index_of(step.slot);
  a.pad = step.pad_slot_id;
  a.S = d.S;
  if (num_accepted.defined()) a.acc = index_of(num_accepted);
  a.commit_all = commit_all;
  a.T = int(d.T);
  a.lpr = lanes_per_row(d.K);
  a.status = exec.device_status;
  DType sd = pool.state.dtype;
  int qf = QF_NONE;
  if (dual) {
    const Tensor& cp = *dual->copy;
    a.dual = true;
    a.ring_v = rec_of(pool.ring_v);
    a.ring_beta = rec_of(pool.ring_beta);
    switch (dual->lay.format) {
      case ReadFormat::bf16:
      case ReadFormat::f16:  // u16 codes [V, K]: a plain bf16 / f16 state with tile strides
        sd = dual->lay.format == ReadFormat::bf16 ? DType::bf16 : DType::f16;
        a.st = StateView{cp.data, cp.stride[0] / 2, cp.stride[1] / 2, d.K};
        break;
      case ReadFormat::fp8_e4m3:
      case ReadFormat::nvfp4:
        qf = packed_qf(dual->lay);
        a.st = StateView{cp.data, cp.stride[0], cp.stride[1], dual->lay.code_row_bytes};
        a.qg = packed_geom(dual->lay);
        break;
    }
  }
  const bool kda = is_kda(d);
  const int64_t G = d.HV / d.H;
  if (a.T == 1 && !dual && commit_all && eager(d, sd)) {  // small batches: eager (decode1.cuh)
    run_eager(fn, a, sd, d, exec);
    return;
  }
  if (a.T == 1) {  // plain decode: staged streaming kernel (replay1.cuh)
    a.d_vec = vec4(pool.ring_d, d.V);
    a.k_vec = vec4(pool.ring_k, d.K);
    a.g_vec = kda && vec4(pool.ring_g, d.K);
    const Replay1PPlan pp = replay1p_plan(a.st, pool, sd, qf, a.qg, dual != nullptr, d, sm_count(), peak_gbps());
    // preparation, then the stream as its programmatic dependent (the plan
    // fits 227 KiB); without scratch under capture, the blocks below
    if (pp.use && (a.scr = replay1p_scratch(fn, pp.bytes, exec, pp.need_scratch)) != nullptr) {
      a.scr_ps = pp.ps;
      a.nh = int(G);
      a.vt = int(d.V);
      a.vtiles = 1;
      a.nst = pp.nst;
      a.nb = pp.nb;
      a.chunk = pp.chunk;
      a.nsw = pp.nsw;
      a.rows = int(d.B);
      static TimelineDump items{std::getenv("R1P_TIMING"), size_t(1) << 20};  // per item (replay1p.cuh)
      a.timing = timeline_stamps(items, size_t(d.B * d.H));
      a.lanes_copy = pp.lanes_copy;
      // the counters and the headers (their `ready` flags)
      cuda_util::check(cudaMemsetAsync(a.scr, 0, size_t(r1p_pay_offset(d.B * d.H)), cuda_util::stream_of(exec)), fn,
                       "workspace");
      // dual: the preparation is the fold's programmatic dependent (a
      // flushing row's item waits for the fold's grid)
      Launch lp = launch_of(fn, pp.prep_grid, 1, 1, P1_WARPS * 32, pp.prep_smem, exec);
      lp.dependent = dual != nullptr;
      if (dual) dual->before();
      kda ? launch_prep1<true>(a, lp) : launch_prep1<false>(a, lp);
      cuda_util::check_launch(fn);
      Launch l = launch_of(fn, pp.grid, 1, 1, pp.threads, pp.smem, exec);
      l.dependent = true;
      if (qf == QF_FP8) kda ? launch_replay1p_quant<QF_FP8, true>(a, l) : launch_replay1p_quant<QF_FP8, false>(a, l);
      else if (qf == QF_NVFP4) kda ? launch_replay1p_quant<QF_NVFP4, true>(a, l) : launch_replay1p_quant<QF_NVFP4, false>(a, l);
      else dispatch<Replay1POp>(sd, kda, a, l);
      cuda_util::check_launch(fn);
      launch_step_cursor(a, commit_all, d, exec, fn);
      return;
    }
    const Replay1Plan plan = replay1_plan(a.st, a.qg, qf, sd, d, sm_count());
    const ReplayTile tile = plan.tile;
    a.nh = tile.nh;
    a.vt = tile.vt;
    a.vtiles = int((d.V + tile.vt - 1) / tile.vt);
    a.ld = plan.ld;
    a.late_first = d.B >= 32;  // batch 1: the early sweeps are 0.4 µs faster
    a.rec_pf = dual ? 0 : replay1_prefetch_distance(kda, d.B, sm_count());
    const bool bulk = plan.bulk, qbulk = plan.qbulk;
    const size_t smem = plan.smem;
#if defined(REPLAYSSM_R1_TIMING)
    {  // per-block timelines (replay1.cuh, R1_STAMP)
      static TimelineDump blocks{std::getenv("R1_TIMING"), size_t(1) << 21};
      a.timing = timeline_stamps(blocks, size_t((G / tile.nh) * a.vtiles) * size_t(d.H) * size_t(d.B));
    }
#endif
    check::require(smem <= 227 * 1024, fn, "pool.L", "L too large for the cuda replay kernel's shared memory");
    Launch l = launch_of(fn, unsigned((G / tile.nh) * a.vtiles), unsigned(d.H), unsigned(d.B),
                         REPLAY1_THREADS, smem, exec);
    // dual: overlaps the fold; rows that flush wait for it on the device
    l.dependent = dual != nullptr;
    if (dual) dual->before();
    if (qf == QF_FP8) kda ? launch_replay1_quant<QF_FP8, true>(a, l, qbulk) : launch_replay1_quant<QF_FP8, false>(a, l, qbulk);
    else if (qf == QF_NVFP4)
      kda ? launch_replay1_quant<QF_NVFP4, true>(a, l, qbulk) : launch_replay1_quant<QF_NVFP4, false>(a, l, qbulk);
    else if (bulk) dispatch<Replay1BulkOp>(sd, kda, a, l);
    else dispatch<Replay1Op>(sd, kda, a, l);
  } else {
    const int sms = sm_count();
    const SpecPlan plan = spec_plan(a.st, qf, sd, d, sms, cuda_util::device_limits(fn).smem_per_sm);
    const bool mma = plan.mma;
    const ReplayTile tile = plan.tile;
    a.nh = tile.nh;
    a.vt = tile.vt;
    a.vtiles = int((d.V + tile.vt - 1) / tile.vt);
    const size_t smem = plan.smem;
    check::require(smem <= 227 * 1024, fn, "pool.L", "L + T too large for the cuda replay kernel's shared memory");
    const Launch l = launch_of(fn, unsigned((G / tile.nh) * a.vtiles), unsigned(d.H), unsigned(d.B),
                               REPLAY_THREADS, smem, exec);
    // REPLAYSSM_SPEC_REC_PF: another distance (0: none), for measurements;
    // none under A3 (heuristics.h SPEC_A3_MIN_T)
    a.rec_pf = dual ? 0
                    : std::max(0, env_int("REPLAYSSM_SPEC_REC_PF",
                                          plan.a3 ? 0 : replay_spec_prefetch_distance(kda, d.B, sms)));
    a.rec16 = mma && rec16_fits(pool, tile, d);
    // the half-tile L2 prefetch (KDA's fp32 tensor-core instances only): off
    // (KDA T = 5 2.9 % slower with it, perf_notes_delta.md v58);
    // REPLAYSSM_SPEC_HALF_PF=1 turns it on
    a.half_pf = env_int("REPLAYSSM_SPEC_HALF_PF", 0) != 0;
    a.a3 = plan.a3;
    if (dual) dual->before();
    if (qf == QF_FP8) kda ? launch_replay_quant<QF_FP8, true>(a, l) : launch_replay_quant<QF_FP8, false>(a, l);
    else if (qf == QF_NVFP4) kda ? launch_replay_quant<QF_NVFP4, true>(a, l) : launch_replay_quant<QF_NVFP4, false>(a, l);
    else if (mma) dispatch<ReplayMmaOp>(sd, kda, a, l);
    else dispatch<ReplayOp>(sd, kda, a, l);
  }
  cuda_util::check_launch(fn);
  launch_step_cursor(a, commit_all, d, exec, fn);
}

// Shared memory of the dual fold kernel, checked (callers check it before
// their first launch, so a rejected call writes nothing).
size_t dual_fold_smem(const char* fn, const DeltaPool& pool, const Dims& d) {
  const size_t smem =
      size_t(dual_fold_floats(is_kda(d), int(d.K), int(d.V), pool.ring_d.defined() ? int(d.L) : 0)) * 4;
  check::require(smem <= 227 * 1024, fn, "pool.L", "L too large for the cuda dual fold kernel's shared memory");
  return smem;
}

// The dual fold / repack kernel over the n = slot.shape[0] rows of `slot`.
void run_dual_fold(const char* fn, int op, const DeltaPool& pool, const QuantLayout& lay, const Tensor& slot,
                   int64_t pad, const Tensor& acc, const Tensor& init, const Tensor* out, int T, const Dims& d,
                   const Exec& exec) {
  const int64_t n = slot.shape[0];
  check_layout(fn, pool.state, d, n);
  DualArgs a;
  a.st = state_of(pool.state);
  a.rings = rings_of(pool, d);
  if (a.rings.cur) {
    a.ring_v = rec_of(pool.ring_v);
    a.ring_beta = rec_of(pool.ring_beta);
    a.k_vec = vec4(pool.ring_k, d.K);
    a.v_vec = vec4(pool.ring_v, d.V);
    a.g_vec = is_kda(d) && vec4(pool.ring_g, d.K);
  }
  a.copy = CopyView{static_cast<uint8_t*>(pool.read_copy.data), pool.read_copy.stride[0], pool.read_copy.stride[1]};
  a.geom = quant::tile_geom(lay);
  a.slot = index_of(slot);
  a.pad = pad;
  a.S = d.S;
  if (acc.defined()) a.acc = index_of(acc);
  if (init.defined()) a.init = index_of(init);
  a.op = op;
  a.T = T;
  if (out) {
    a.out = out->data;
    a.out_dt = out->dtype;
    a.o0 = out->stride[0], a.o1 = out->stride[1], a.o2 = out->stride[2];
  }
  a.H = int(d.H);
  a.HV = int(d.HV);
  a.G = int(d.HV / d.H);
  a.K = int(d.K);
  a.V = int(d.V);
  a.lpr = lanes_per_row(d.K);
  a.status = exec.device_status;
  size_t smem = dual_fold_smem(fn, pool, d);
  // Tensor cores when the rows fit their fragments (K = 128, 16-row tiles,
  // aligned 4-element groups) and two blocks per SM keep their shared memory.
  const int L = pool.ring_d.defined() ? int(d.L) : 0;
  const size_t mma_smem = size_t(dual_fold_mma_layout(is_kda(d), int(d.V), L).bytes);
  const bool mma = mma_rows_fit(a.st, int64_t(dtype_size(pool.state.dtype)), d) && mma_smem <= DUAL_FOLD_MMA_SMEM_CAP;
  if (mma) smem = mma_smem;
  // (REPLAYSSM_FOLD_HPB overrides the heads per block, for measurements)
  const int hpb = dual_fold_heads_per_block(d.HV, d.HV / d.H, n, sm_count(), mma && !is_kda(d),
                                                mma && is_kda(d));
  a.hpb = int(std::clamp<int64_t>(env_int("REPLAYSSM_FOLD_HPB", hpb), 1, d.HV));
  const Launch l = launch_of(fn, unsigned((d.HV + a.hpb - 1) / a.hpb), unsigned(n), 1, DUAL_THREADS, smem, exec);
  if (mma) {
    static TimelineDump blocks{std::getenv("FOLD_TIMING"), size_t(1) << 17};  // per-block timelines (dual_fold_stamp)
    a.timing = timeline_stamps(blocks, size_t(l.grid[0]) * l.grid[1]);
    dispatch<DualFoldMmaOp>(pool.state.dtype, is_kda(d), a, l);
  } else {
    dispatch<DualFoldOp>(pool.state.dtype, is_kda(d), a, l);
  }
  cuda_util::check_launch(fn);
}

}  // namespace

namespace {
// What run_replay gives the kernels of a contiguous pool of `state` rows at
// `at` (the launch choices that depend on shapes alone), or of its read copy
// of layout `copy`: bf16 / f16 copies as 16-bit states with tile strides,
// fp8 / nvfp4 ones packed.
struct ContiguousRead {
  StateView st;
  DType sd;
  int qf = QF_NONE;
  QuantGeom qg{};
};
ContiguousRead contiguous_read(const Dims& d, DType state, const QuantLayout* copy, void* at) {
  ContiguousRead r{StateView{at, d.HV * d.V * d.K, d.V * d.K, d.K}, state};
  if (copy && (copy->format == ReadFormat::bf16 || copy->format == ReadFormat::f16)) {
    r.sd = copy->format == ReadFormat::bf16 ? DType::bf16 : DType::f16;
    r.st = StateView{at, d.HV * copy->tile_bytes / 2, copy->tile_bytes / 2, d.K};
  } else if (copy) {
    r.qf = packed_qf(*copy);
    r.st = StateView{at, d.HV * copy->tile_bytes, copy->tile_bytes, copy->code_row_bytes};
    r.qg = packed_geom(*copy);
  }
  return r;
}
}  // namespace

Replay1Choice replay1_choice(const Dims& d, DType state, int sms, const QuantLayout* copy) {
  const ContiguousRead r = contiguous_read(d, state, copy, reinterpret_cast<void*>(uintptr_t(256)));
  const Replay1Plan p = replay1_plan(r.st, r.qg, r.qf, r.sd, d, sms);
  return Replay1Choice{p.tile.nh, p.tile.vt, p.ld, p.bulk, p.qbulk, int64_t(p.smem)};
}

SpecChoice spec_choice(const Dims& d, DType state, int sms, const QuantLayout* copy, DType d_dtype, DType k_dtype,
                       int smem_per_sm) {
  void* const at = reinterpret_cast<void*>(uintptr_t(256));
  const ContiguousRead r = contiguous_read(d, state, copy, at);
  const SpecPlan p = spec_plan(r.st, r.qf, r.sd, d, sms, smem_per_sm);
  const int64_t S = std::max<int64_t>(d.S, 1), R = std::max<int64_t>(d.R, d.L + d.T);
  DeltaPool pool;
  pool.ring_d = Tensor::view(at, d_dtype, {S, R, d.HV, d.V}, Device::cuda);
  pool.ring_k = Tensor::view(at, k_dtype, {S, R, d.H, d.K}, Device::cuda);
  pool.ring_g = is_kda(d) ? Tensor::view(at, DType::f32, {S, R, d.HV, d.K}, Device::cuda)
                          : Tensor::view(at, DType::f32, {S, R, d.HV}, Device::cuda);
  return SpecChoice{p.tile.nh, p.tile.vt, p.mma, int64_t(p.smem), p.mma && rec16_fits(pool, p.tile, d), p.a3};
}

namespace {
// replay1p_plan for a contiguous pool of these dtypes (S, R from d, at least
// one slot and L + 1 positions): the launch choice and workspace size that
// depend on shapes alone; copy: a dual pool's read copy of that layout, laid
// out as run_replay does (the step on the copy).
Replay1PPlan contiguous_replay1p_plan(const Dims& d, DType state, DType d_dtype, DType k_dtype, int sms,
                                      double gbps, const QuantLayout* copy = nullptr) {
  void* const at = reinterpret_cast<void*>(uintptr_t(256));
  const ContiguousRead r = contiguous_read(d, state, copy, at);
  const int64_t S = std::max<int64_t>(d.S, 1), R = std::max<int64_t>(d.R, d.L + 1);
  DeltaPool pool;
  pool.ring_d = Tensor::view(at, d_dtype, {S, R, d.HV, d.V}, Device::cuda);
  pool.ring_k = Tensor::view(at, k_dtype, {S, R, d.H, d.K}, Device::cuda);
  pool.ring_g = is_kda(d) ? Tensor::view(at, DType::f32, {S, R, d.HV, d.K}, Device::cuda)
                          : Tensor::view(at, DType::f32, {S, R, d.HV}, Device::cuda);
  return replay1p_plan(r.st, pool, r.sd, r.qf, r.qg, copy != nullptr, d, sms, gbps);
}
}  // namespace

size_t workspace_bytes(SsmOp op, const Dims& d) {
  if (op != SsmOp::replay_step || d.T != 1 || d.B < 1 || d.L < 1) return 0;
  size_t m = 0;
  for (DType sd : {DType::f32, DType::bf16, DType::f16})  // records of the state's dtype or fp32
    for (DType rd : {sd, DType::f32}) {
      const Replay1PPlan p = contiguous_replay1p_plan(d, sd, rd, DType::f32, sm_count(), peak_gbps());
      if (p.use) m = std::max(m, p.bytes);
    }
  if (d.K == R1B_K)  // a dual pool's step on its read copy (the same scratch)
    for (ReadFormat f : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      const QuantLayout lay = quant_layout(f, d.V, d.K);
      const Replay1PPlan p = contiguous_replay1p_plan(d, DType::f32, DType::f32, DType::f32, sm_count(), peak_gbps(), &lay);
      if (p.use) m = std::max(m, p.bytes);
    }
  return m;
}

Replay1PChoice replay1p_choice(const Dims& d, DType state, DType d_dtype, DType k_dtype, int sms,
                               const QuantLayout* copy, double gbps) {
  const Replay1PPlan p = contiguous_replay1p_plan(d, state, d_dtype, k_dtype, sms, gbps, copy);
  return Replay1PChoice{p.use, p.nst, p.nb, p.threads, int64_t(p.grid), int64_t(p.smem)};
}

void replay_step(const DeltaStep& step, const DeltaPool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d, const Exec& exec) {
  const char* fn = "delta_replay_step";
  cuda_util::require_supported_device(fn);
  check_layout(fn, pool.state, d, d.B);
  run_replay(fn, step, pool, num_accepted, commit_all, d, exec, nullptr);
}

// Dual step: fold + repack the rows whose plan flushes (high precision),
// then the step on the copy, then the cursors.
void dual_replay_step(const DeltaStep& step, const DeltaPool& pool, const QuantLayout& lay,
                      const Tensor& num_accepted, bool commit_all, const Dims& d, const Exec& exec) {
  const char* fn = "delta_replay_step";
  cuda_util::require_supported_device(fn);
  check_layout(fn, pool.state, d, d.B);
  dual_fold_smem(fn, pool, d);
  const DualRead dr{&pool.read_copy, lay, [&] {
                      run_dual_fold(fn, DUAL_STEP, pool, lay, step.slot, step.pad_slot_id, num_accepted, Tensor{},
                                    nullptr, int(d.T), d, exec);
                    }};
  run_replay(fn, step, pool, num_accepted, commit_all, d, exec, &dr);
}

void dual_prefill(const DeltaPrefill& p, const DeltaPool& pool, const QuantLayout& lay, const Dims& d,
                  const Exec& exec) {
  const char* fn = "delta_prefill";
  cuda_util::require_supported_device(fn);
  check_layout(fn, pool.state, d, d.B);
  dual_fold_smem(fn, pool, d);
  // Rows continuing from their state start from the high-precision fold.
  if (pool.cursor.defined() && p.initial.defined())
    run_dual_fold(fn, DUAL_INIT, pool, lay, p.slot, p.pad_slot_id, Tensor{}, p.initial, nullptr, 0, d, exec);
  DeltaPool sp;  // the checkpoint alone: the prefill must not fold ring_d
  sp.state = pool.state;
  sp.L = pool.L;
  prefill(p, sp, d, exec);
  if (pool.cursor.defined()) run_cursor_op(fn, CUR_PREFILL, pool, p.slot, p.pad_slot_id, Tensor{}, d, exec);
  run_dual_fold(fn, DUAL_PACK, pool, lay, p.slot, p.pad_slot_id, Tensor{}, Tensor{}, nullptr, 0, d, exec);
}

void dual_materialize(const DeltaPool& pool, const QuantLayout& lay, const Tensor& slot, int64_t pad,
                      const Tensor& out, const Dims& d, const Exec& exec) {
  const char* fn = "delta_materialize";
  cuda_util::require_supported_device(fn);
  run_dual_fold(fn, DUAL_MATERIALIZE, pool, lay, slot, pad, Tensor{}, Tensor{}, &out, 0, d, exec);
}

void dual_flush(const DeltaPool& pool, const QuantLayout& lay, const Tensor& slot, int64_t pad, const Dims& d,
                const Exec& exec) {
  const char* fn = "delta_flush";
  cuda_util::require_supported_device(fn);
  run_dual_fold(fn, DUAL_FLUSH, pool, lay, slot, pad, Tensor{}, Tensor{}, nullptr, 0, d, exec);
  run_cursor_op(fn, CUR_FLUSH, pool, slot, pad, Tensor{}, d, exec);
}

void dual_pack(const DeltaPool& pool, const QuantLayout& lay, const Tensor& slot, int64_t pad, const Dims& d,
               const Exec& exec) {
  const char* fn = "delta_reset_slot";
  cuda_util::require_supported_device(fn);
  run_dual_fold(fn, DUAL_PACK, pool, lay, slot, pad, Tensor{}, Tensor{}, nullptr, 0, d, exec);
}

void commit(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& num_accepted,
            const Dims& d, const Exec& exec) {
  const char* fn = "delta_commit";
  cuda_util::require_supported_device(fn);
  run_cursor_op(fn, CUR_COMMIT, pool, slot, pad, num_accepted, d, exec);
}

namespace {
void run_fold(const char* fn, const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor* out,
              const Dims& d, const Exec& exec) {
  check_layout(fn, pool.state, d, d.B);
  FoldArgs a;
  a.st = state_of(pool.state);
  a.rings = rings_of(pool, d);
  a.slot = index_of(slot);
  a.pad = pad;
  a.S = d.S;
  if (out) {
    a.out = out->data;
    a.out_dt = out->dtype;
    a.o0 = out->stride[0]; a.o1 = out->stride[1]; a.o2 = out->stride[2];
  }
  a.H = int(d.H);
  a.HV = int(d.HV);
  a.G = int(d.HV / d.H);
  a.K = int(d.K);
  a.V = int(d.V);
  a.lpr = lanes_per_row(d.K);
  a.status = exec.device_status;
  const int per_block = REC_THREADS / a.lpr;
  const size_t smem = a.rings.d ? size_t(align4(int64_t(d.L) * d.K) + align4(d.K)) * 4 : 0;
  const Launch l = launch_of(fn, unsigned((d.V + per_block - 1) / per_block), unsigned(d.HV), unsigned(d.B),
                             REC_THREADS, smem, exec);
  dispatch<FoldOp>(pool.state.dtype, is_kda(d), a, l);
  cuda_util::check_launch(fn);
}
}  // namespace

void materialize(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d, const Exec& exec) {
  const char* fn = "delta_materialize";
  cuda_util::require_supported_device(fn);
  run_fold(fn, pool, slot, pad, &out, d, exec);
}

void flush(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Dims& d, const Exec& exec) {
  const char* fn = "delta_flush";
  cuda_util::require_supported_device(fn);
  run_fold(fn, pool, slot, pad, nullptr, d, exec);
  run_cursor_op(fn, CUR_FLUSH, pool, slot, pad, Tensor{}, d, exec);
}

}  // namespace replayssm::delta::cuda

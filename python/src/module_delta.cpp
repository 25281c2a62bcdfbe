// replayssm._C: GDN / KDA (include/replayssm/delta.h) and causal conv1d
// (include/replayssm/conv1d.h). Conventions as in module.cpp; the family is
// passed as family="gdn" | "kda".
#include "convert.h"
#include "replayssm/conv1d.h"
#include "replayssm/delta.h"
#include "replayssm/dual.h"

using namespace rssm_py;

namespace {

DeltaPool delta_pool(const char* fn, const Out& state, const OptOut& ring_d, const OptOut& ring_k,
                     const OptOut& ring_ks, const OptOut& ring_g, const OptOut& cursor,
                     int64_t L, const OptOut& read_copy, const std::string& read_format,
                     const OptOut& ring_v, const OptOut& ring_beta) {
  DeltaPool p;
  p.state = view(fn, "state", state);
  p.ring_d = view(fn, "ring_d", ring_d);
  p.ring_k = view(fn, "ring_k", ring_k);
  p.ring_ks = view(fn, "ring_ks", ring_ks);
  p.ring_g = view(fn, "ring_g", ring_g);
  p.cursor = view(fn, "cursor", cursor);
  p.L = L;
  p.read_copy = view(fn, "read_copy", read_copy);
  p.read_format = read_format_from_name(fn, "read_format", read_format);
  p.ring_v = view(fn, "ring_v", ring_v);
  p.ring_beta = view(fn, "ring_beta", ring_beta);
  return p;
}

#define DELTA_POOL_PARAMS                                                                     \
  const Out &state, const OptOut &ring_d, const OptOut &ring_k, const OptOut &ring_ks,        \
      const OptOut &ring_g, const OptOut &cursor, int64_t L, const OptOut &read_copy,         \
      const std::string &read_format, const OptOut &ring_v, const OptOut &ring_beta
#define DELTA_POOL_ARGS                                                                       \
  "state"_a, "ring_d"_a.none() = nb::none(), "ring_k"_a.none() = nb::none(),                  \
      "ring_ks"_a.none() = nb::none(), "ring_g"_a.none() = nb::none(),                         \
      "cursor"_a.none() = nb::none(), "L"_a = 16, "read_copy"_a.none() = nb::none(),           \
      "read_format"_a = "bf16", "ring_v"_a.none() = nb::none(), "ring_beta"_a.none() = nb::none()
#define DELTA_POOL()                                                                   \
  delta_pool(fn, state, ring_d, ring_k, ring_ks, ring_g, cursor, L, read_copy, read_format, \
             ring_v, ring_beta)

DeltaGating gating(bool raw_gate, bool raw_beta, bool l2norm_qk, float q_scale) {
  DeltaGating g;
  g.raw_gate = raw_gate;
  g.raw_beta = raw_beta;
  g.l2norm_qk = l2norm_qk;
  g.q_scale = q_scale;
  return g;
}

// Per-token inputs shared by step and prefill (step: [B, T, ...]; prefill: [tokens, ...]).
#define DELTA_IN_PARAMS                                                                      \
  const In &q, const In &k, const In &v, const In &g, const In &beta, const Out &o,          \
      const OptIn &A_log, const OptIn &dt_bias, bool raw_gate, bool raw_beta, bool l2norm_qk, \
      float q_scale, int64_t pad_slot_id
#define DELTA_IN_ARGS                                                                         \
  "q"_a, "k"_a, "v"_a, "g"_a, "beta"_a, "o"_a, "A_log"_a.none() = nb::none(),                 \
      "dt_bias"_a.none() = nb::none(), "raw_gate"_a = true, "raw_beta"_a = true,               \
      "l2norm_qk"_a = true, "q_scale"_a = 0.f, "pad_slot_id"_a = -1

template <typename S>
void fill_inputs(const char* fn, S& s, DELTA_IN_PARAMS) {
  s.q = view(fn, "q", q);
  s.k = view(fn, "k", k);
  s.v = view(fn, "v", v);
  s.g = view(fn, "g", g);
  s.beta = view(fn, "beta", beta);
  s.o = view(fn, "o", o);
  s.A_log = view(fn, "A_log", A_log);
  s.dt_bias = view(fn, "dt_bias", dt_bias);
  s.gating = gating(raw_gate, raw_beta, l2norm_qk, q_scale);
  s.pad_slot_id = pad_slot_id;
}
#define FILL_INPUTS(s)                                                                     \
  fill_inputs(fn, s, q, k, v, g, beta, o, A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, \
              q_scale, pad_slot_id)

}  // namespace

void bind_delta_conv(nb::module_& m) {
  m.def(
      "delta_decode",
      [](const std::string& family, DELTA_IN_PARAMS, const In& slot, const Out& state,
         EXEC_PARAMS) {
        const char* fn = "delta_decode";
        DeltaStep s;
        FILL_INPUTS(s);
        s.slot = view(fn, "slot", slot);
        Tensor st = view(fn, "state", state);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_decode(f, s, st, e);
      },
      nb::kw_only(), "family"_a, DELTA_IN_ARGS, "slot"_a, "state"_a, EXEC_ARGS);

  m.def(
      "delta_snapshot_decode",
      [](const std::string& family, DELTA_IN_PARAMS, const Out& state, const In& state_indices,
         const OptIn& num_accepted, EXEC_PARAMS) {
        const char* fn = "delta_snapshot_decode";
        DeltaStep s;
        FILL_INPUTS(s);
        Tensor st = view(fn, "state", state), si = view(fn, "state_indices", state_indices);
        Tensor na = view(fn, "num_accepted", num_accepted);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_snapshot_decode(f, s, st, si, na, e);
      },
      nb::kw_only(), "family"_a, DELTA_IN_ARGS, "state"_a, "state_indices"_a,
      "num_accepted"_a.none() = nb::none(), EXEC_ARGS);

  m.def(
      "delta_prefill",
      [](const std::string& family, DELTA_IN_PARAMS, const In& cu_seqlens, const In& slot,
         const OptIn& initial, DELTA_POOL_PARAMS, EXEC_PARAMS) {
        const char* fn = "delta_prefill";
        DeltaPrefill p;
        FILL_INPUTS(p);
        p.cu_seqlens = view(fn, "cu_seqlens", cu_seqlens);
        p.slot = view(fn, "slot", slot);
        p.initial = view(fn, "initial", initial);
        DeltaPool pool = DELTA_POOL();
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_prefill(f, p, pool, e);
      },
      nb::kw_only(), "family"_a, DELTA_IN_ARGS, "cu_seqlens"_a, "slot"_a, "initial"_a.none() = nb::none(),
      DELTA_POOL_ARGS, EXEC_ARGS);

  m.def(
      "delta_replay_step",
      [](const std::string& family, DELTA_IN_PARAMS, const In& slot, DELTA_POOL_PARAMS,
         const OptIn& num_accepted, bool commit_all, EXEC_PARAMS) {
        const char* fn = "delta_replay_step";
        DeltaStep s;
        FILL_INPUTS(s);
        s.slot = view(fn, "slot", slot);
        DeltaPool pool = DELTA_POOL();
        Tensor na = view(fn, "num_accepted", num_accepted);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_replay_step(f, s, pool, na, commit_all, e);
      },
      nb::kw_only(), "family"_a, DELTA_IN_ARGS, "slot"_a, DELTA_POOL_ARGS, "num_accepted"_a.none() = nb::none(),
      "commit_all"_a = false, EXEC_ARGS);

  m.def(
      "delta_commit",
      [](const std::string& family, DELTA_POOL_PARAMS, const In& slot, const In& num_accepted,
         int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "delta_commit";
        DeltaPool pool = DELTA_POOL();
        Tensor sl = view(fn, "slot", slot), na = view(fn, "num_accepted", num_accepted);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_commit(f, pool, sl, pad_slot_id, na, e);
      },
      nb::kw_only(), "family"_a, DELTA_POOL_ARGS, "slot"_a, "num_accepted"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "delta_materialize",
      [](const std::string& family, DELTA_POOL_PARAMS, const In& slot, const Out& out,
         int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "delta_materialize";
        DeltaPool pool = DELTA_POOL();
        Tensor sl = view(fn, "slot", slot), ot = view(fn, "out", out);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_materialize(f, pool, sl, pad_slot_id, ot, e);
      },
      nb::kw_only(), "family"_a, DELTA_POOL_ARGS, "slot"_a, "out"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "delta_flush",
      [](const std::string& family, DELTA_POOL_PARAMS, const In& slot, int64_t pad_slot_id,
         EXEC_PARAMS) {
        const char* fn = "delta_flush";
        DeltaPool pool = DELTA_POOL();
        Tensor sl = view(fn, "slot", slot);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_flush(f, pool, sl, pad_slot_id, e);
      },
      nb::kw_only(), "family"_a, DELTA_POOL_ARGS, "slot"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "delta_copy_slot",
      [](const std::string& family, DELTA_POOL_PARAMS, const In& src, const In& dst,
         int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "delta_copy_slot";
        DeltaPool pool = DELTA_POOL();
        Tensor s = view(fn, "src", src), d = view(fn, "dst", dst);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_copy_slot(f, pool, s, d, pad_slot_id, e);
      },
      nb::kw_only(), "family"_a, DELTA_POOL_ARGS, "src"_a, "dst"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "delta_reset_slot",
      [](const std::string& family, DELTA_POOL_PARAMS, const In& slot, int64_t pad_slot_id,
         EXEC_PARAMS) {
        const char* fn = "delta_reset_slot";
        DeltaPool pool = DELTA_POOL();
        Tensor sl = view(fn, "slot", slot);
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_reset_slot(f, pool, sl, pad_slot_id, e);
      },
      nb::kw_only(), "family"_a, DELTA_POOL_ARGS, "slot"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def("delta_ring_length", &delta_ring_length, "L"_a, "T_max"_a);
  m.def(
      "delta_replay_bytes_per_row",
      [](const std::string& family, int64_t H, int64_t HV, int64_t K, int64_t V,
         const std::string& state_dtype, const std::string& act_dtype,
         const std::string& d_dtype, int64_t L, int64_t T_max) {
        const char* fn = "delta_replay_bytes_per_row";
        return delta_replay_bytes_per_row(
            family_from_name(fn, family), DeltaShape{H, HV, K, V},
            dtype_from_name(fn, "state_dtype", state_dtype),
            dtype_from_name(fn, "act_dtype", act_dtype), dtype_from_name(fn, "d_dtype", d_dtype),
            L, T_max);
      },
      nb::kw_only(), "family"_a, "H"_a, "HV"_a, "K"_a, "V"_a, "state_dtype"_a, "act_dtype"_a,
      "d_dtype"_a = "fp32", "L"_a = 16, "T_max"_a = 1);
  m.def(
      "delta_snapshot_bytes_per_row",
      [](int64_t H, int64_t HV, int64_t K, int64_t V, const std::string& state_dtype,
         int64_t T_max) {
        return delta_snapshot_bytes_per_row(
            DeltaShape{H, HV, K, V},
            dtype_from_name("delta_snapshot_bytes_per_row", "state_dtype", state_dtype), T_max);
      },
      nb::kw_only(), "H"_a, "HV"_a, "K"_a, "V"_a, "state_dtype"_a, "T_max"_a = 1);

  // ---- dual / shared precision (include/replayssm/dual.h) --------------------
  m.def(
      "delta_decode_shared",
      [](const std::string& family, DELTA_IN_PARAMS, const In& slot, const Out& packed_state,
         const std::string& format, bool stochastic, uint64_t seed, uint64_t step, EXEC_PARAMS) {
        const char* fn = "delta_decode_shared";
        DeltaStep s;
        FILL_INPUTS(s);
        s.slot = view(fn, "slot", slot);
        Tensor ps = view(fn, "packed_state", packed_state);
        ReadFormat rf = read_format_from_name(fn, "format", format);
        QuantRounding qr{stochastic, seed, step};
        DeltaFamily f = family_from_name(fn, family);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        delta_decode_shared(f, s, ps, rf, qr, e);
      },
      nb::kw_only(), "family"_a, DELTA_IN_ARGS, "slot"_a, "packed_state"_a, "format"_a,
      "stochastic"_a = false, "seed"_a = uint64_t(0), "step"_a = uint64_t(0), EXEC_ARGS);
  m.def(
      "delta_tile_bytes",
      [](const std::string& format, int64_t H, int64_t HV, int64_t K, int64_t V) {
        return delta_tile_bytes(read_format_from_name("delta_tile_bytes", "format", format),
                                DeltaShape{H, HV, K, V});
      },
      nb::kw_only(), "format"_a, "H"_a, "HV"_a, "K"_a, "V"_a);
  m.def(
      "delta_state_bytes_per_row",
      [](const std::string& mode, const std::string& family, int64_t H, int64_t HV, int64_t K,
         int64_t V, const std::string& state_dtype, const std::string& read_format,
         const std::string& act_dtype, const std::string& d_dtype, int64_t L, int64_t T_max) {
        const char* fn = "delta_state_bytes_per_row";
        return delta_state_bytes_per_row(
            precision_mode_from_name(fn, mode), family_from_name(fn, family),
            DeltaShape{H, HV, K, V}, dtype_from_name(fn, "state_dtype", state_dtype),
            read_format_from_name(fn, "read_format", read_format),
            dtype_from_name(fn, "act_dtype", act_dtype), dtype_from_name(fn, "d_dtype", d_dtype),
            L, T_max);
      },
      nb::kw_only(), "mode"_a, "family"_a, "H"_a, "HV"_a, "K"_a, "V"_a, "state_dtype"_a = "fp32",
      "read_format"_a = "bf16", "act_dtype"_a = "bf16", "d_dtype"_a = "fp32", "L"_a = 16,
      "T_max"_a = 1);
  m.def(
      "delta_workspace_bytes",
      [](const std::string& family, const std::string& op, int64_t H, int64_t HV, int64_t K, int64_t V,
         int64_t B, int64_t T, int64_t L, const std::string& backend, int num_threads) {
        const char* fn = "delta_workspace_bytes";
        return delta_workspace_bytes(family_from_name(fn, family), ssm_op_from_name(fn, op),
                                     DeltaShape{H, HV, K, V}, B, T, L,
                                     make_exec(fn, backend, 0, num_threads, std::nullopt, std::nullopt));
      },
      nb::kw_only(), "family"_a, "op"_a, "H"_a, "HV"_a, "K"_a, "V"_a, "B"_a, "T"_a = 1, "L"_a = 16,
      "backend"_a = "cpu", "num_threads"_a = 0);
  m.def(
      "conv1d_workspace_bytes",
      [](const std::string& op, int64_t B, int64_t T, int64_t dim, int64_t W, const std::string& backend,
         int num_threads) {
        const char* fn = "conv1d_workspace_bytes";
        Conv1dOp o;
        if (op == "update") o = Conv1dOp::update;
        else if (op == "prefill") o = Conv1dOp::prefill;
        else if (op == "commit") o = Conv1dOp::commit;
        else throw Error(fn, "op", "expected update | prefill | commit, got '" + op + "'");
        return conv1d_workspace_bytes(o, B, T, dim, W,
                                      make_exec(fn, backend, 0, num_threads, std::nullopt, std::nullopt));
      },
      nb::kw_only(), "op"_a, "B"_a, "T"_a = 1, "dim"_a, "W"_a, "backend"_a = "cpu", "num_threads"_a = 0);

  // ---- conv1d --------------------------------------------------------------
  m.def(
      "conv1d_update",
      [](const In& x, const In& weight, const Out& out, const In& slot, const Out& conv_state,
         const Out& conv_pending, const OptIn& bias, bool silu, int64_t pad_slot_id,
         const OptIn& num_accepted, EXEC_PARAMS) {
        const char* fn = "conv1d_update";
        Conv1dStep s;
        s.x = view(fn, "x", x);
        s.weight = view(fn, "weight", weight);
        s.out = view(fn, "out", out);
        s.slot = view(fn, "slot", slot);
        s.bias = view(fn, "bias", bias);
        s.silu = silu;
        s.pad_slot_id = pad_slot_id;
        Tensor cs = view(fn, "conv_state", conv_state), cp = view(fn, "conv_pending", conv_pending);
        Tensor na = view(fn, "num_accepted", num_accepted);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        conv1d_update(s, cs, cp, na, e);
      },
      nb::kw_only(), "x"_a, "weight"_a, "out"_a, "slot"_a, "conv_state"_a, "conv_pending"_a,
      "bias"_a.none() = nb::none(), "silu"_a = true, "pad_slot_id"_a = -1,
      "num_accepted"_a.none() = nb::none(), EXEC_ARGS);

  m.def(
      "conv1d_prefill",
      [](const In& x, const In& weight, const Out& out, const In& cu_seqlens, const In& slot,
         const Out& conv_state, const Out& conv_pending, const OptIn& bias, bool silu,
         int64_t pad_slot_id, const OptIn& initial, EXEC_PARAMS) {
        const char* fn = "conv1d_prefill";
        Conv1dPrefill p;
        p.x = view(fn, "x", x);
        p.weight = view(fn, "weight", weight);
        p.out = view(fn, "out", out);
        p.cu_seqlens = view(fn, "cu_seqlens", cu_seqlens);
        p.slot = view(fn, "slot", slot);
        p.bias = view(fn, "bias", bias);
        p.silu = silu;
        p.pad_slot_id = pad_slot_id;
        p.initial = view(fn, "initial", initial);
        Tensor cs = view(fn, "conv_state", conv_state), cp = view(fn, "conv_pending", conv_pending);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        conv1d_prefill(p, cs, cp, e);
      },
      nb::kw_only(), "x"_a, "weight"_a, "out"_a, "cu_seqlens"_a, "slot"_a, "conv_state"_a, "conv_pending"_a,
      "bias"_a.none() = nb::none(), "silu"_a = true, "pad_slot_id"_a = -1,
      "initial"_a.none() = nb::none(), EXEC_ARGS);

  m.def(
      "conv1d_commit",
      [](const Out& conv_state, const Out& conv_pending, const In& slot, const In& num_accepted,
         int64_t W, int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "conv1d_commit";
        Tensor cs = view(fn, "conv_state", conv_state), cp = view(fn, "conv_pending", conv_pending);
        Tensor sl = view(fn, "slot", slot), na = view(fn, "num_accepted", num_accepted);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        conv1d_commit(cs, cp, sl, pad_slot_id, na, W, e);
      },
      nb::kw_only(), "conv_state"_a, "conv_pending"_a, "slot"_a, "num_accepted"_a, "W"_a,
      "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def("conv1d_state_rows", &conv1d_state_rows, "W"_a, "T_max"_a);
}

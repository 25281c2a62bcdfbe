// replayssm._C: nanobind binding of the public C++ API over DLPack.
//
// Every array argument is an nb::ndarray: any object that exports DLPack
// (torch, cupy, jax) or the buffer protocol (numpy), or a DLPack capsule. It
// is viewed zero-copy as a replayssm::Tensor (strides in elements, int64).
// No torch or CUDA headers: a CUDA stream is passed as an integer handle
// (cudaStream_t; 0 = the default stream) and forwarded in Exec::stream.
//
// The functions mirror include/replayssm/{mamba2,delta,conv1d}.h with the
// params structs flattened into keyword arguments. Pools are passed field by
// field (state, ring tensors, cursor, L; dual pools add read_copy and
// read_format, GDN / KDA also ring_v and ring_beta); absent optional tensors
// are None. Read formats are named bf16 | fp16 | fp8 | nvfp4.
// Library errors (replayssm::Error) surface as replayssm.Error, a ValueError
// carrying the library's message; the GIL is released while the library runs.
#include "convert.h"
#include "replayssm/dual.h"
#include "replayssm/mamba2.h"

using namespace rssm_py;

namespace {

// ---- Mamba-2 ---------------------------------------------------------------

Mamba2Pool m2_pool(const char* fn, const Out& state, const OptOut& ring_x, const OptOut& ring_dt,
                   const OptOut& ring_B, const OptOut& cursor, int64_t L,
                   const OptOut& read_copy, const std::string& read_format, const OptIn& A) {
  Mamba2Pool p;
  p.state = view(fn, "state", state);
  p.ring_x = view(fn, "ring_x", ring_x);
  p.ring_dt = view(fn, "ring_dt", ring_dt);
  p.ring_B = view(fn, "ring_B", ring_B);
  p.cursor = view(fn, "cursor", cursor);
  p.L = L;
  p.A = view(fn, "A", A);
  p.read_copy = view(fn, "read_copy", read_copy);
  p.read_format = read_format_from_name(fn, "read_format", read_format);
  return p;
}

#define M2_POOL_PARAMS                                                                    \
  const Out &state, const OptOut &ring_x, const OptOut &ring_dt, const OptOut &ring_B,    \
      const OptOut &cursor, int64_t L, const OptOut &read_copy, const std::string &read_format
#define M2_POOL_ARGS                                                                     \
  "state"_a, "ring_x"_a.none() = nb::none(), "ring_dt"_a.none() = nb::none(),            \
      "ring_B"_a.none() = nb::none(), "cursor"_a.none() = nb::none(), "L"_a = 16,         \
      "read_copy"_a.none() = nb::none(), "read_format"_a = "bf16"

Mamba2Step m2_step(const char* fn, const In& x, const In& dt, const In& B, const In& C,
                   const In& A, const Out& y, const In& slot, const OptIn& z,
                   const OptIn& dt_bias, const OptIn& D, bool dt_softplus, int64_t pad) {
  Mamba2Step s;
  s.x = view(fn, "x", x);
  s.dt = view(fn, "dt", dt);
  s.Bm = view(fn, "B", B);
  s.Cm = view(fn, "C", C);
  s.A = view(fn, "A", A);
  s.y = view(fn, "y", y);
  s.slot = view(fn, "slot", slot);
  s.z = view(fn, "z", z);
  s.dt_bias = view(fn, "dt_bias", dt_bias);
  s.D = view(fn, "D", D);
  s.dt_softplus = dt_softplus;
  s.pad_slot_id = pad;
  return s;
}

#define M2_STEP_PARAMS                                                                      \
  const In &x, const In &dt, const In &B, const In &C, const In &A, const Out &y,           \
      const In &slot, const OptIn &z, const OptIn &dt_bias, const OptIn &D, bool dt_softplus, \
      int64_t pad_slot_id
#define M2_STEP_ARGS                                                                        \
  "x"_a, "dt"_a, "B"_a, "C"_a, "A"_a, "y"_a, "slot"_a, "z"_a.none() = nb::none(),           \
      "dt_bias"_a.none() = nb::none(), "D"_a.none() = nb::none(), "dt_softplus"_a = true,    \
      "pad_slot_id"_a = -1
#define M2_STEP() \
  m2_step(fn, x, dt, B, C, A, y, slot, z, dt_bias, D, dt_softplus, pad_slot_id)

void bind_mamba2(nb::module_& m) {
  m.def(
      "mamba2_decode",
      [](M2_STEP_PARAMS, const Out& state, EXEC_PARAMS) {
        const char* fn = "mamba2_decode";
        Mamba2Step s = M2_STEP();
        Tensor st = view(fn, "state", state);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_decode(s, st, e);
      },
      nb::kw_only(), M2_STEP_ARGS, "state"_a, EXEC_ARGS);

  m.def(
      "mamba2_snapshot_decode",
      [](M2_STEP_PARAMS, const Out& state, const In& state_indices, const OptIn& num_accepted,
         EXEC_PARAMS) {
        const char* fn = "mamba2_snapshot_decode";
        Mamba2Step s = M2_STEP();
        Tensor st = view(fn, "state", state), si = view(fn, "state_indices", state_indices);
        Tensor na = view(fn, "num_accepted", num_accepted);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_snapshot_decode(s, st, si, na, e);
      },
      nb::kw_only(), M2_STEP_ARGS, "state"_a, "state_indices"_a, "num_accepted"_a.none() = nb::none(), EXEC_ARGS);

  m.def(
      "mamba2_prefill",
      [](const In& x, const In& dt, const In& B, const In& C, const In& A, const Out& y,
         const In& cu_seqlens, const In& slot, const OptIn& z, const OptIn& dt_bias,
         const OptIn& D, bool dt_softplus, int64_t pad_slot_id, const OptIn& initial,
         M2_POOL_PARAMS, EXEC_PARAMS) {
        const char* fn = "mamba2_prefill";
        Mamba2Prefill p;
        p.x = view(fn, "x", x);
        p.dt = view(fn, "dt", dt);
        p.Bm = view(fn, "B", B);
        p.Cm = view(fn, "C", C);
        p.A = view(fn, "A", A);
        p.y = view(fn, "y", y);
        p.cu_seqlens = view(fn, "cu_seqlens", cu_seqlens);
        p.slot = view(fn, "slot", slot);
        p.z = view(fn, "z", z);
        p.dt_bias = view(fn, "dt_bias", dt_bias);
        p.D = view(fn, "D", D);
        p.dt_softplus = dt_softplus;
        p.pad_slot_id = pad_slot_id;
        p.initial = view(fn, "initial", initial);
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, A);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_prefill(p, pool, e);
      },
      nb::kw_only(), "x"_a, "dt"_a, "B"_a, "C"_a, "A"_a, "y"_a, "cu_seqlens"_a, "slot"_a,
      "z"_a.none() = nb::none(), "dt_bias"_a.none() = nb::none(), "D"_a.none() = nb::none(),
      "dt_softplus"_a = true, "pad_slot_id"_a = -1, "initial"_a.none() = nb::none(), M2_POOL_ARGS,
      EXEC_ARGS);

  m.def(
      "mamba2_replay_step",
      [](M2_STEP_PARAMS, M2_POOL_PARAMS, const OptIn& num_accepted, bool commit_all,
         EXEC_PARAMS) {
        const char* fn = "mamba2_replay_step";
        Mamba2Step s = M2_STEP();
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, A);
        Tensor na = view(fn, "num_accepted", num_accepted);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_replay_step(s, pool, na, commit_all, e);
      },
      nb::kw_only(), M2_STEP_ARGS, M2_POOL_ARGS, "num_accepted"_a.none() = nb::none(), "commit_all"_a = false,
      EXEC_ARGS);

  m.def(
      "mamba2_commit",
      [](M2_POOL_PARAMS, const In& slot, const In& num_accepted, int64_t pad_slot_id,
         EXEC_PARAMS) {
        const char* fn = "mamba2_commit";
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, std::nullopt);
        Tensor sl = view(fn, "slot", slot), na = view(fn, "num_accepted", num_accepted);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_commit(pool, sl, pad_slot_id, na, e);
      },
      nb::kw_only(), M2_POOL_ARGS, "slot"_a, "num_accepted"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "mamba2_materialize",
      [](M2_POOL_PARAMS, const OptIn& A, const In& slot, const Out& out, int64_t pad_slot_id,
         EXEC_PARAMS) {
        const char* fn = "mamba2_materialize";
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, A);
        Tensor sl = view(fn, "slot", slot), o = view(fn, "out", out);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_materialize(pool, sl, pad_slot_id, o, e);
      },
      nb::kw_only(), M2_POOL_ARGS, "A"_a.none() = nb::none(), "slot"_a, "out"_a, "pad_slot_id"_a = -1,
      EXEC_ARGS);

  m.def(
      "mamba2_flush",
      [](M2_POOL_PARAMS, const OptIn& A, const In& slot, int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "mamba2_flush";
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, A);
        Tensor sl = view(fn, "slot", slot);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_flush(pool, sl, pad_slot_id, e);
      },
      nb::kw_only(), M2_POOL_ARGS, "A"_a.none() = nb::none(), "slot"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "mamba2_copy_slot",
      [](M2_POOL_PARAMS, const In& src, const In& dst, int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "mamba2_copy_slot";
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, std::nullopt);
        Tensor s = view(fn, "src", src), d = view(fn, "dst", dst);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_copy_slot(pool, s, d, pad_slot_id, e);
      },
      nb::kw_only(), M2_POOL_ARGS, "src"_a, "dst"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def(
      "mamba2_reset_slot",
      [](M2_POOL_PARAMS, const In& slot, int64_t pad_slot_id, EXEC_PARAMS) {
        const char* fn = "mamba2_reset_slot";
        Mamba2Pool pool = m2_pool(fn, state, ring_x, ring_dt, ring_B, cursor, L, read_copy,
                                  read_format, std::nullopt);
        Tensor sl = view(fn, "slot", slot);
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_reset_slot(pool, sl, pad_slot_id, e);
      },
      nb::kw_only(), M2_POOL_ARGS, "slot"_a, "pad_slot_id"_a = -1, EXEC_ARGS);

  m.def("mamba2_ring_length", &mamba2_ring_length, "L"_a, "T_max"_a);
  m.def(
      "mamba2_replay_bytes_per_row",
      [](int64_t H, int64_t P, int64_t N, int64_t G, const std::string& state_dtype,
         const std::string& act_dtype, int64_t L, int64_t T_max) {
        const char* fn = "mamba2_replay_bytes_per_row";
        return mamba2_replay_bytes_per_row(Mamba2Shape{H, P, N, G},
                                           dtype_from_name(fn, "state_dtype", state_dtype),
                                           dtype_from_name(fn, "act_dtype", act_dtype), L, T_max);
      },
      nb::kw_only(), "H"_a, "P"_a, "N"_a, "G"_a, "state_dtype"_a, "act_dtype"_a, "L"_a, "T_max"_a);
  m.def(
      "mamba2_snapshot_bytes_per_row",
      [](int64_t H, int64_t P, int64_t N, int64_t G, const std::string& state_dtype,
         int64_t T_max) {
        return mamba2_snapshot_bytes_per_row(
            Mamba2Shape{H, P, N, G},
            dtype_from_name("mamba2_snapshot_bytes_per_row", "state_dtype", state_dtype), T_max);
      },
      nb::kw_only(), "H"_a, "P"_a, "N"_a, "G"_a, "state_dtype"_a, "T_max"_a);

  // ---- dual / shared precision (include/replayssm/dual.h) --------------------
  m.def(
      "mamba2_decode_shared",
      [](M2_STEP_PARAMS, const Out& packed_state, const std::string& format, bool stochastic,
         uint64_t seed, uint64_t step, EXEC_PARAMS) {
        const char* fn = "mamba2_decode_shared";
        Mamba2Step s = M2_STEP();
        Tensor ps = view(fn, "packed_state", packed_state);
        ReadFormat rf = read_format_from_name(fn, "format", format);
        QuantRounding q{stochastic, seed, step};
        Exec e = EXEC();
        nb::gil_scoped_release r;
        mamba2_decode_shared(s, ps, rf, q, e);
      },
      nb::kw_only(), M2_STEP_ARGS, "packed_state"_a, "format"_a, "stochastic"_a = false,
      "seed"_a = uint64_t(0), "step"_a = uint64_t(0), EXEC_ARGS);
  m.def(
      "mamba2_tile_bytes",
      [](const std::string& format, int64_t H, int64_t P, int64_t N, int64_t G) {
        return mamba2_tile_bytes(read_format_from_name("mamba2_tile_bytes", "format", format),
                                 Mamba2Shape{H, P, N, G});
      },
      nb::kw_only(), "format"_a, "H"_a, "P"_a, "N"_a, "G"_a);
  m.def(
      "mamba2_state_bytes_per_row",
      [](const std::string& mode, int64_t H, int64_t P, int64_t N, int64_t G,
         const std::string& state_dtype, const std::string& read_format,
         const std::string& act_dtype, int64_t L, int64_t T_max) {
        const char* fn = "mamba2_state_bytes_per_row";
        return mamba2_state_bytes_per_row(
            precision_mode_from_name(fn, mode), Mamba2Shape{H, P, N, G},
            dtype_from_name(fn, "state_dtype", state_dtype),
            read_format_from_name(fn, "read_format", read_format),
            dtype_from_name(fn, "act_dtype", act_dtype), L, T_max);
      },
      nb::kw_only(), "mode"_a, "H"_a, "P"_a, "N"_a, "G"_a, "state_dtype"_a = "fp32",
      "read_format"_a = "bf16", "act_dtype"_a = "bf16", "L"_a = 16, "T_max"_a = 1);
  m.def(
      "mamba2_workspace_bytes",
      [](const std::string& op, int64_t H, int64_t P, int64_t N, int64_t G, int64_t B, int64_t T, int64_t L,
         const std::string& backend, int num_threads) {
        const char* fn = "mamba2_workspace_bytes";
        return mamba2_workspace_bytes(ssm_op_from_name(fn, op), Mamba2Shape{H, P, N, G}, B, T, L,
                                      make_exec(fn, backend, 0, num_threads, std::nullopt, std::nullopt));
      },
      nb::kw_only(), "op"_a, "H"_a, "P"_a, "N"_a, "G"_a, "B"_a, "T"_a = 1, "L"_a = 16, "backend"_a = "cpu",
      "num_threads"_a = 0);
}

}  // namespace

void bind_delta_conv(nb::module_& m);  // module_delta.cpp

NB_MODULE(_C, m) {
  m.doc() = "replayssm C++ library over DLPack (see replayssm/_C.pyi for signatures)";
  nb::exception<Error>(m, "Error", PyExc_ValueError);
  m.def("cuda_available", &cuda_available);
  m.def(
      "check_device_status",
      [](const std::string& backend, uintptr_t stream, const Out& device_status) {
        const char* fn = "check_device_status";
        Exec e = make_exec(fn, backend, stream, 0, OptOut(device_status), std::nullopt);
        nb::gil_scoped_release r;
        check_device_status(e, fn);
      },
      nb::kw_only(), "backend"_a, "stream"_a, "device_status"_a);
  m.def(
      "dtype_size",
      [](const std::string& name) { return dtype_size(dtype_from_name("dtype_size", "dtype", name)); },
      "dtype"_a);
  bind_mamba2(m);
  bind_delta_conv(m);
}

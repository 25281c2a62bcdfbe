"""Dual-precision pools and shared decode through the binding with numpy
(docs/dual_precision.md): a dual pool keeps the checkpoint trajectory of a
plain pool (bit for bit across read formats; Mamba-2 also bit for bit against
the plain pool, GDN / KDA within fp32 rounding since a flush recomputes d
against the checkpoint), its read copy is the checkpoint packed, its outputs
are close to the plain pool's within the format's rounding; shared decode on
packed states; errors name the argument."""
import numpy as np
import pytest

import replayssm
from conftest import delta_inputs, mamba2_inputs, rel_err, slots

H, P, N, G = 2, 8, 32, 1          # Mamba-2 tiles [P, N]: N a multiple of 32 (fp8 blocks)
DH, HV, K, V = 2, 2, 32, 8         # GDN / KDA tiles [V, K]
S, L, T_MAX = 5, 4, 2
FORMATS = ("bf16", "fp16", "fp8", "nvfp4")
# Relative L2 error of a dual pool's outputs against the plain pool's (the
# state read through the copy): about 3x the measured error (bf16 1.7e-3,
# fp16 2.2e-4, fp8 3.0e-2, nvfp4 9.5e-2 on these inputs).
OUT_TOL = {"bf16": 6e-3, "fp16": 1e-3, "fp8": 8e-2, "nvfp4": 2.5e-1}
# (T, commit_all) per step: plain decode and speculative windows; with L = 4
# rows flush every few steps.
SCHEDULE = [(1, True), (2, False), (2, False), (1, False), (1, True), (2, True), (1, True),
            (2, False), (1, False), (1, True)]
SL = slots(3, 1)


def _copy_as_fp16(pool, R, Kc):
    """fp16 read copy of the live slots viewed as [n, heads, R, K] (codes only:
    the fp16 tile is exactly its codes, R·K·2 bytes)."""
    c = pool.read_copy[SL]
    return c[..., :R * Kc * 2].copy().view(np.float16).reshape(c.shape[0], c.shape[1], R, Kc)


def _run_mamba2(read_format, backend, rng):
    pool = replayssm.mamba2_pool(S, H, P, N, G, L=L, T_max=T_MAX, act_dtype="fp32",
                                 read_format=read_format)
    par = mamba2_inputs(rng, 1, 1, H, P, N, G)
    pool.A = par["A"]
    kw = dict(dt_bias=par["dt_bias"], D=par["D"], backend=backend)
    cu = np.array([0, 3, 5], np.int32)
    pr = mamba2_inputs(rng, 1, 5, H, P, N, G)
    ys = [replayssm.mamba2_prefill(pr["x"][0], pr["dt"][0], par["A"], pr["B"][0], pr["C"][0],
                                   pool, cu, SL, z=pr["z"][0], **kw)]
    states, copies, acc = [pool.state.copy()], [], None
    for T, commit_all in SCHEDULE:
        inp = mamba2_inputs(rng, len(SL), T, H, P, N, G)
        ys.append(replayssm.mamba2_replay_step(inp["x"], inp["dt"], par["A"], inp["B"],
                                               inp["C"], pool, SL, acc, commit_all=commit_all,
                                               z=inp["z"], **kw))
        acc = None if commit_all else rng.integers(1, T + 1, len(SL)).astype(np.int32)
        states.append(pool.state.copy())
        if read_format is not None:
            copies.append(pool.read_copy.copy())
    return pool, ys, states, copies


def _run_delta(family, read_format, backend, rng):
    pool = replayssm.delta_pool(family, S, DH, HV, K, V, L=L, T_max=T_MAX, act_dtype="fp32",
                                read_format=read_format)
    par = delta_inputs(rng, family, 1, 1, DH, HV, K, V)
    kw = dict(A_log=par["A_log"], dt_bias=par["dt_bias"], backend=backend)
    cu = np.array([0, 3, 5], np.int32)
    pr = delta_inputs(rng, family, 1, 5, DH, HV, K, V)
    f = {n: pr[n][0] for n in ("q", "k", "v", "g", "beta")}
    ys = [replayssm.delta_prefill(family, f["q"], f["k"], f["v"], f["g"], f["beta"], pool, cu,
                                  SL, **kw)]
    states, copies, acc = [pool.state.copy()], [], None
    for T, commit_all in SCHEDULE:
        inp = delta_inputs(rng, family, len(SL), T, DH, HV, K, V)
        ys.append(replayssm.delta_replay_step(family, inp["q"], inp["k"], inp["v"], inp["g"],
                                              inp["beta"], pool, SL, acc,
                                              commit_all=commit_all, **kw))
        acc = None if commit_all else rng.integers(1, T + 1, len(SL)).astype(np.int32)
        states.append(pool.state.copy())
        if read_format is not None:
            copies.append(pool.read_copy.copy())
    return pool, ys, states, copies


def _run(family, read_format, backend):
    rng = np.random.default_rng(7)  # same inputs for every format
    if family == "mamba2":
        return _run_mamba2(read_format, backend, rng)
    return _run_delta(family, read_format, backend, rng)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("family", ["mamba2", "gdn", "kda"])
def test_dual_checkpoint_independent_of_copy(family, backend):
    plain = _run(family, None, backend)
    runs = {fmt: _run(family, fmt, backend) for fmt in FORMATS}
    flushed = 0
    for i, st in enumerate(plain[2]):
        for fmt in FORMATS:
            st_dual = runs[fmt][2][i]
            # Bit for bit across formats (design §5.5).
            assert np.array_equal(st_dual.view(np.uint32), runs["bf16"][2][i].view(np.uint32)), \
                f"{fmt} step {i}: checkpoint depends on the read format"
            if family == "mamba2":  # records do not depend on the state: the plain fold
                assert np.array_equal(st_dual.view(np.uint32), st.view(np.uint32)), \
                    f"{fmt} step {i}: checkpoint differs from the plain pool"
            else:  # flushes recompute d against the checkpoint
                assert rel_err(st_dual[SL], st[SL]) <= 1e-5, f"{fmt} step {i}"
        if i > 0 and not np.array_equal(st, plain[2][i - 1]):
            flushed += 1
    assert flushed >= 2, "the schedule should flush"
    # Outputs read the copy: close within the format's rounding.
    for fmt in FORMATS:
        for i, (yd, yp) in enumerate(zip(runs[fmt][1], plain[1])):
            assert rel_err(yd, yp) <= OUT_TOL[fmt], f"{fmt} output {i}: {rel_err(yd, yp):.3g}"
    # fp16 copy = the checkpoint cast to fp16 after every step (flush or not).
    pool = runs["fp16"][0]
    R, Kc = (P, N) if family == "mamba2" else (V, K)
    for i, st in enumerate(runs["fp16"][2][1:]):
        pool.read_copy = runs["fp16"][3][i]
        assert np.array_equal(_copy_as_fp16(pool, R, Kc), st[SL].astype(np.float16)), f"step {i}"


@pytest.mark.parametrize("family", ["mamba2", "gdn", "kda"])
def test_dual_non_flush_steps_keep_checkpoint_and_copy(family):
    pool, _, states, copies = _run(family, "fp8", "cpu")
    same = [np.array_equal(states[i + 1], states[i]) for i in range(len(copies))]
    assert any(same) and not all(same)
    for i in range(1, len(copies)):
        if np.array_equal(states[i + 1], states[i]):
            assert np.array_equal(copies[i], copies[i - 1]), f"step {i}: copy written"


@pytest.mark.parametrize("family", ["mamba2", "gdn", "kda"])
def test_dual_slot_ops_and_materialize(family):
    pool = _run(family, "nvfp4", "cpu")[0]
    if family == "mamba2":
        ops = (replayssm.mamba2_copy_slot, replayssm.mamba2_reset_slot,
               replayssm.mamba2_materialize, replayssm.mamba2_flush)
    else:
        ops = (replayssm.delta_copy_slot, replayssm.delta_reset_slot,
               replayssm.delta_materialize, replayssm.delta_flush)
    copy_slot, reset_slot, materialize, flush = ops
    m = materialize(pool, slots(3), backend="cpu")
    flush(pool, slots(3), backend="cpu")
    assert rel_err(pool.state[3:4], m) <= 1e-5
    copy_slot(pool, slots(3), slots(0), backend="cpu")
    assert np.array_equal(pool.read_copy[0], pool.read_copy[3])
    assert np.array_equal(pool.state[0], pool.state[3])
    reset_slot(pool, slots(3), backend="cpu")
    assert np.all(pool.state[3] == 0)
    assert not np.array_equal(pool.read_copy[0], pool.read_copy[3])


def test_bytes_per_row_and_pool_sizes():
    for fmt in FORMATS:
        tile = replayssm.mamba2_tile_bytes(format=fmt, H=H, P=P, N=N, G=G)
        pool = replayssm.mamba2_pool(S, H, P, N, G, L=L, T_max=T_MAX, read_format=fmt,
                                     act_dtype="fp32")
        assert pool.read_copy.shape == (S, H, tile) and pool.read_copy.dtype == np.uint8
        assert pool.read_copy.ctypes.data % 16 == 0
        single = replayssm.mamba2_bytes_per_row(H, P, N, G, act_dtype="fp32", L=L, T_max=T_MAX)
        dual = replayssm.mamba2_bytes_per_row(H, P, N, G, mode="dual", read_format=fmt,
                                              act_dtype="fp32", L=L, T_max=T_MAX)
        assert dual == single + H * tile
        assert replayssm.mamba2_bytes_per_row(H, P, N, G, mode="shared", read_format=fmt) == H * tile
        dtile = replayssm.delta_tile_bytes(format=fmt, H=DH, HV=HV, K=K, V=V)
        dp = replayssm.delta_pool("gdn", S, DH, HV, K, V, L=L, T_max=T_MAX, read_format=fmt,
                                  act_dtype="fp32")
        R = replayssm.ring_length(L=L, T_max=T_MAX)
        assert dp.read_copy.shape == (S, HV, dtile)
        assert dp.ring_v.shape == (S, R, HV, V) and dp.ring_beta.shape == (S, R, HV)
        dsingle = replayssm.delta_bytes_per_row("gdn", DH, HV, K, V, act_dtype="fp32", L=L,
                                                T_max=T_MAX)
        ddual = replayssm.delta_bytes_per_row("gdn", DH, HV, K, V, mode="dual", read_format=fmt,
                                              act_dtype="fp32", L=L, T_max=T_MAX)
        assert ddual == dsingle + HV * dtile + R * HV * (4 * V + 4)
    layered = replayssm.mamba2_pool(S, H, P, N, G, read_format="fp8", act_dtype="fp32",
                                    layers=2)
    assert len(layered) == 2 and layered[1].read_copy.shape[0] == S


@pytest.mark.parametrize("fmt", FORMATS)
def test_shared_decode(fmt):
    rng = np.random.default_rng(3)
    ps = replayssm.mamba2_shared_state(S, H, P, N, G, format=fmt)
    st = np.zeros((S, H, P, N), np.float32)
    par = mamba2_inputs(rng, 1, 1, H, P, N, G)
    dps = replayssm.delta_shared_state(S, DH, HV, K, V, format=fmt)
    dst = np.zeros((S, HV, V, K), np.float32)
    dpar = delta_inputs(rng, "kda", 1, 1, DH, HV, K, V)
    dkw = dict(A_log=dpar["A_log"], dt_bias=dpar["dt_bias"], backend="cpu")
    for step in range(3):
        inp = mamba2_inputs(rng, 2, 1, H, P, N, G)
        args = (inp["x"], inp["dt"], par["A"], inp["B"], inp["C"])
        kw = dict(dt_bias=par["dt_bias"], D=par["D"], backend="cpu")
        y = replayssm.mamba2_decode_shared(*args, ps, SL, format=fmt, step=step, **kw)
        yp = replayssm.mamba2_decode(*args, st, SL, **kw)
        assert rel_err(y, yp) <= OUT_TOL[fmt] * 2, f"step {step}"
        d = delta_inputs(rng, "kda", 2, 1, DH, HV, K, V)
        dargs = (d["q"], d["k"], d["v"], d["g"], d["beta"])
        o = replayssm.delta_decode_shared("kda", *dargs, dps, SL, format=fmt, **dkw)
        op = replayssm.delta_decode("kda", *dargs, dst, SL, **dkw)
        assert rel_err(o, op) <= OUT_TOL[fmt] * 2, f"step {step}"
    assert np.all(ps[[0, 2, 4]] == 0) and np.any(ps[3] != 0)


def test_shared_stochastic_rounding_is_seeded():
    rng = np.random.default_rng(5)
    inp = mamba2_inputs(rng, 2, 1, H, P, N, G)
    out = []
    for seed in (1, 1, 2):
        ps = replayssm.mamba2_shared_state(S, H, P, N, G, format="fp8")
        for step in range(2):
            replayssm.mamba2_decode_shared(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], ps,
                                           SL, format="fp8", stochastic=True, seed=seed,
                                           step=step, dt_bias=inp["dt_bias"], backend="reference")
        out.append(ps)
    assert np.array_equal(out[0], out[1])
    assert not np.array_equal(out[0], out[2])


def test_dual_errors_name_the_argument():
    rng = np.random.default_rng(9)
    with pytest.raises(replayssm.Error, match="read_format"):
        replayssm.mamba2_pool(S, H, P, N, G, read_format="fp4")
    with pytest.raises(replayssm.Error, match="read_format"):
        replayssm.mamba2_pool(S, H, P, N, G, read_format="fp8", replay=False)
    inp = mamba2_inputs(rng, 2, 1, H, P, N, G)
    args = (inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"])
    # A copy sized for bf16 declared as fp8.
    pool = replayssm.mamba2_pool(S, H, P, N, G, L=L, read_format="bf16", act_dtype="fp32")
    pool.A, pool.read_format = inp["A"], "fp8"
    before = pool.state.copy()
    with pytest.raises(replayssm.Error, match="read_copy"):
        replayssm.mamba2_replay_step(*args, pool, SL, commit_all=True, backend="cpu")
    assert np.array_equal(pool.state, before)
    pool.read_format = "nvfp3"
    with pytest.raises(replayssm.Error, match="read_format"):
        replayssm.mamba2_replay_step(*args, pool, SL, commit_all=True, backend="cpu")
    # Wrong copy dtype.
    pool.read_format, pool.read_copy = "bf16", np.zeros(pool.read_copy.shape, np.float32)
    with pytest.raises(replayssm.Error, match="read_copy"):
        replayssm.mamba2_replay_step(*args, pool, SL, commit_all=True, backend="cpu")
    # GDN dual pool without its β records.
    d = delta_inputs(rng, "gdn", 2, 1, DH, HV, K, V)
    dpool = replayssm.delta_pool("gdn", S, DH, HV, K, V, L=L, read_format="fp8",
                                 act_dtype="fp32")
    dpool.ring_beta = None
    with pytest.raises(replayssm.Error, match="ring_beta"):
        replayssm.delta_replay_step("gdn", d["q"], d["k"], d["v"], d["g"], d["beta"], dpool, SL,
                                    commit_all=True, A_log=d["A_log"], dt_bias=d["dt_bias"],
                                    backend="cpu")
    # Shared decode: bad format name, packed state sized for another format.
    ps = replayssm.mamba2_shared_state(S, H, P, N, G, format="bf16")
    with pytest.raises(replayssm.Error, match="format"):
        replayssm.mamba2_decode_shared(*args, ps, SL, format="int4", dt_bias=inp["dt_bias"])
    with pytest.raises(replayssm.Error, match="packed_state"):
        replayssm.mamba2_decode_shared(*args, ps, SL, format="nvfp4", dt_bias=inp["dt_bias"])
    with pytest.raises(replayssm.Error, match="read_format"):
        replayssm.mamba2_bytes_per_row(H, P, N, G, mode="dual", read_format="fp9")

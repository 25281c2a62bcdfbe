"""Mamba-2 through the binding with numpy: every operation on backend="cpu"
against backend="reference", replay against the standard recurrence on the
accepted token stream, pad rows, slot operations."""
import numpy as np
import pytest

import replayssm
from conftest import assert_close, copy_pool, mamba2_inputs, slots

H, P, N, G = 4, 8, 16, 2
S = 6


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("T", [1, 3])
def test_decode_cpu_matches_reference(rng, dtype, T):
    inp = mamba2_inputs(rng, 3, T, H, P, N, G, dtype)
    state0 = rng.standard_normal((S, H, P, N)).astype(np.float32)
    sl = slots(4, 0, 2)
    out = {}
    for be in ("reference", "cpu"):
        st = state0.copy()
        y = replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], st, sl,
                                    z=inp["z"], dt_bias=inp["dt_bias"], D=inp["D"], backend=be)
        out[be] = (y, st)
    assert out["cpu"][0].dtype == np.dtype(dtype)
    assert_close(out["cpu"][0], out["reference"][0], dtype, "y")
    assert_close(out["cpu"][1], out["reference"][1], "float32", "state")
    untouched = [1, 3, 5]
    assert np.array_equal(out["cpu"][1][untouched], state0[untouched])


def test_decode_pad_rows(rng):
    inp = mamba2_inputs(rng, 3, 1, H, P, N, G)
    state0 = rng.standard_normal((S, H, P, N)).astype(np.float32)
    st = state0.copy()
    y = np.full(inp["x"].shape, np.nan, np.float32)
    replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], st,
                            slots(2, -1, 3), dt_bias=inp["dt_bias"], y=y, backend="cpu")
    assert np.all(y[1] == 0.0)
    assert np.all(np.isfinite(y))
    assert np.array_equal(st[[0, 1, 4, 5]], state0[[0, 1, 4, 5]])


def test_snapshot_decode_matches_reference(rng):
    T = 3
    inp = mamba2_inputs(rng, 2, T, H, P, N, G)
    state0 = rng.standard_normal((8, H, P, N)).astype(np.float32)
    idx = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    acc = np.array([2, 1], np.int32)
    res = {}
    for be in ("reference", "cpu"):
        st = state0.copy()
        y = replayssm.mamba2_snapshot_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"],
                                             st, idx, acc, z=inp["z"], dt_bias=inp["dt_bias"],
                                             D=inp["D"], backend=be)
        res[be] = (y, st)
    assert_close(res["cpu"][0], res["reference"][0], what="y")
    assert_close(res["cpu"][1], res["reference"][1], what="state")


def _pool(L=4, T_max=3, dtype="fp32"):
    return replayssm.mamba2_pool(S, H, P, N, G, L=L, T_max=T_max, state_dtype="fp32",
                                 act_dtype=dtype)


def test_prefill_then_materialize(rng):
    lens = [5, 0, 3]
    tokens = sum(lens)
    inp = mamba2_inputs(rng, 1, tokens, H, P, N, G)
    flat = {k: (v[0] if v is not None and v.ndim > 1 and v.shape[0] == 1 else v)
            for k, v in inp.items()}
    cu = np.array([0, 5, 5, 8], np.int32)
    sl = slots(1, -1, 4)
    res = {}
    for be in ("reference", "cpu"):
        pool = _pool()
        pool.A = flat["A"]
        y = replayssm.mamba2_prefill(flat["x"], flat["dt"], flat["A"], flat["B"], flat["C"], pool,
                                     cu, sl, z=flat["z"], dt_bias=flat["dt_bias"], D=flat["D"],
                                     backend=be)
        m = replayssm.mamba2_materialize(pool, slots(1, 4), backend=be)
        res[be] = (y, pool, m)
    assert_close(res["cpu"][0], res["reference"][0], what="y")
    assert_close(res["cpu"][1].state, res["reference"][1].state, what="state")
    assert_close(res["cpu"][2], res["cpu"][1].state[[1, 4]], what="materialize = checkpoint")
    assert np.all(res["cpu"][1].cursor == 0)


def _standard_window(base, inp, A, sl, accepted):
    """Standard recurrence over a window of T tokens from `base`: outputs of
    every token (token t sees tokens 0..t), and base advanced by the
    accepted count of each row."""
    T = inp["x"].shape[1]
    run = base.copy()
    ys = []
    for t in range(T):
        cut = lambda k: inp[k][:, t:t + 1]  # noqa: E731
        ys.append(replayssm.mamba2_decode(cut("x"), cut("dt"), A, cut("B"), cut("C"), run, sl,
                                          z=None if inp["z"] is None else cut("z"),
                                          dt_bias=inp["dt_bias"], D=inp["D"],
                                          backend="reference")[:, 0])
        for b, s in enumerate(sl):
            if s >= 0 and t == accepted[b] - 1:
                base[s] = run[s]
    return np.stack(ys, axis=1)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_replay_matches_standard_on_accepted_stream(rng, backend):
    """Speculative replay steps (T = 3) with random acceptances equal the
    standard decode run on the accepted tokens only (design §5.1); the
    materialised and flushed states equal the standard state."""
    L, T, Bsz = 4, 3, 2
    pool = _pool(L=L, T_max=T)
    sl = slots(3, 1)
    base = np.zeros((S, H, P, N), np.float32)
    A = mamba2_inputs(rng, 1, 1, H, P, N, G)["A"]
    acc = None
    for step in range(6):
        inp = mamba2_inputs(rng, Bsz, T, H, P, N, G)
        y = replayssm.mamba2_replay_step(inp["x"], inp["dt"], A, inp["B"], inp["C"], pool, sl,
                                         acc, z=inp["z"], dt_bias=inp["dt_bias"], D=inp["D"],
                                         backend=backend)
        acc = rng.integers(1, T + 1, Bsz).astype(np.int32)
        yb = _standard_window(base, inp, A, sl, acc)
        assert_close(y, yb, what=f"step {step}")
    replayssm.mamba2_commit(pool, sl, acc, backend=backend)
    pool.A = A
    m = replayssm.mamba2_materialize(pool, sl, backend=backend)
    assert_close(m, base[sl], what="materialize")
    replayssm.mamba2_flush(pool, sl, backend=backend)
    assert np.all(pool.cursor[sl, 1] == 0)
    assert_close(pool.state[sl], base[sl], what="flushed checkpoint")


def test_plain_decode_replay_commit_all(rng):
    """T = 1 with commit_all: outputs equal the baseline; the checkpoint is
    written only at the flushing steps (every L steps); pad rows are zero."""
    L = 4
    pool = _pool(L=L, T_max=1)
    sl = slots(0, 5, -1)
    base = np.zeros((S, H, P, N), np.float32)
    A = mamba2_inputs(rng, 1, 1, H, P, N, G)["A"]
    for step in range(2 * L + 1):
        inp = mamba2_inputs(rng, 3, 1, H, P, N, G, z=False)
        inp["x"][0] += 1.0  # keep the state away from zero so flushes change bytes
        before = pool.state.copy()
        y = replayssm.mamba2_replay_step(inp["x"], inp["dt"], A, inp["B"], inp["C"], pool, sl,
                                         commit_all=True, dt_bias=inp["dt_bias"], backend="cpu")
        yb = replayssm.mamba2_decode(inp["x"], inp["dt"], A, inp["B"], inp["C"], base, sl,
                                     dt_bias=inp["dt_bias"], backend="reference")
        assert_close(y[:2], yb[:2], what=f"step {step}")
        assert np.all(y[2] == 0)
        changed = not np.array_equal(pool.state, before)
        assert changed == (step in (L, 2 * L)), f"step {step}: checkpoint written = {changed}"


def test_copy_and_reset_slot(rng):
    pool = _pool()
    for name in ("state", "ring_x", "ring_dt", "ring_B"):
        getattr(pool, name)[...] = rng.standard_normal(getattr(pool, name).shape)
    pool.cursor[...] = [1, 2, 0]
    replayssm.mamba2_copy_slot(pool, slots(0, -1), slots(3, 4), backend="cpu")
    assert np.array_equal(pool.state[3], pool.state[0])
    assert np.array_equal(pool.ring_x[3], pool.ring_x[0])
    assert np.array_equal(pool.cursor[3], pool.cursor[0])
    replayssm.mamba2_reset_slot(pool, slots(3), backend="cpu")
    assert np.all(pool.state[3] == 0) and np.all(pool.cursor[3] == 0)
    assert not np.all(pool.state[0] == 0)


def test_layer_major_pool_views(rng):
    pools = replayssm.mamba2_pool(S, H, P, N, G, L=4, T_max=1, act_dtype="fp32", layers=2)
    inp = mamba2_inputs(rng, 2, 1, H, P, N, G, z=False)
    replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], pools[1],
                                 slots(0, 1), commit_all=True, backend="cpu")
    assert np.all(pools[0].cursor == 0)
    assert np.all(pools[1].cursor[:2, 1] == 1)

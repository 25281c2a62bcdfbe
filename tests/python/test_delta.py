"""GDN / KDA and conv1d through the binding with numpy: cpu against
reference, replay against the standard recurrence on the accepted stream,
pad rows, slot operations."""
import numpy as np
import pytest

import replayssm
from conftest import assert_close, delta_inputs, slots

H, HV, K, V, S = 2, 4, 16, 8, 6
GATE = ("g", "beta", "A_log", "dt_bias")


def _kw(inp):
    return {k: inp[k] for k in ("A_log", "dt_bias") if k in inp}


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_decode_cpu_matches_reference(rng, family, dtype):
    inp = delta_inputs(rng, family, 3, 2, H, HV, K, V, dtype)
    st0 = (0.1 * rng.standard_normal((S, HV, V, K))).astype(np.float32)
    res = {}
    for be in ("reference", "cpu"):
        st = st0.copy()
        o = replayssm.delta_decode(family, inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                                   st, slots(5, -1, 0), backend=be, **_kw(inp))
        res[be] = (o, st)
    assert_close(res["cpu"][0], res["reference"][0], dtype, "o")
    assert_close(res["cpu"][1], res["reference"][1], "float32", "state")
    assert np.all(res["cpu"][0][1] == 0)
    assert np.array_equal(res["cpu"][1][1:5], st0[1:5])


@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_activated_gates_no_l2norm(rng, family):
    inp = delta_inputs(rng, family, 2, 1, H, HV, K, V, raw=False)
    st0 = np.zeros((S, HV, V, K), np.float32)
    res = []
    for be in ("reference", "cpu"):
        st = st0.copy()
        res.append(replayssm.delta_decode(family, inp["q"], inp["k"], inp["v"], inp["g"],
                                          inp["beta"], st, slots(0, 1), raw_gate=False,
                                          raw_beta=False, l2norm_qk=False, q_scale=0.5,
                                          backend=be))
    assert_close(res[1], res[0])


@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_snapshot_decode_matches_reference(rng, family):
    inp = delta_inputs(rng, family, 2, 3, H, HV, K, V)
    st0 = (0.1 * rng.standard_normal((8, HV, V, K))).astype(np.float32)
    idx = np.array([[0, 1, 2], [5, 6, 7]], np.int32)
    res = {}
    for be in ("reference", "cpu"):
        st = st0.copy()
        o = replayssm.delta_snapshot_decode(family, inp["q"], inp["k"], inp["v"], inp["g"],
                                            inp["beta"], st, idx, slots(3, 1), backend=be,
                                            **_kw(inp))
        res[be] = (o, st)
    assert_close(res["cpu"][0], res["reference"][0], what="o")
    assert_close(res["cpu"][1], res["reference"][1], what="state")


@pytest.mark.parametrize("family", ["gdn", "kda"])
@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_replay_matches_standard_on_accepted_stream(rng, family, backend):
    L, T, Bsz = 4, 3, 2
    pool = replayssm.delta_pool(family, S, H, HV, K, V, L=L, T_max=T, act_dtype="fp32")
    sl = slots(2, 4)
    base = np.zeros((S, HV, V, K), np.float32)
    params = delta_inputs(rng, family, 1, 1, H, HV, K, V)
    acc = None
    for step in range(6):
        inp = delta_inputs(rng, family, Bsz, T, H, HV, K, V)
        kw = _kw(params)
        o = replayssm.delta_replay_step(family, inp["q"], inp["k"], inp["v"], inp["g"],
                                        inp["beta"], pool, sl, acc, backend=backend, **kw)
        acc = rng.integers(1, T + 1, Bsz).astype(np.int32)
        run = base.copy()
        for t in range(T):
            c = {n: inp[n][:, t:t + 1] for n in ("q", "k", "v", "g", "beta")}
            ob = replayssm.delta_decode(family, c["q"], c["k"], c["v"], c["g"], c["beta"], run,
                                        sl, backend="reference", **kw)
            assert_close(o[:, t], ob[:, 0], what=f"step {step} token {t}")
            for b, s in enumerate(sl):
                if t == acc[b] - 1:
                    base[s] = run[s]
    replayssm.delta_commit(pool, sl, acc, backend=backend)
    m = replayssm.delta_materialize(pool, sl, backend=backend)
    assert_close(m, base[sl], what="materialize")
    replayssm.delta_flush(pool, sl, backend=backend)
    assert_close(pool.state[sl], base[sl], what="flushed checkpoint")
    replayssm.delta_copy_slot(pool, slots(2), slots(0), backend=backend)
    assert np.array_equal(pool.state[0], pool.state[2])
    replayssm.delta_reset_slot(pool, slots(2), backend=backend)
    assert np.all(pool.state[2] == 0) and np.all(pool.cursor[2] == 0)


@pytest.mark.parametrize("family", ["gdn", "kda"])
def test_prefill_matches_reference(rng, family):
    cu = np.array([0, 4, 7], np.int32)
    inp = delta_inputs(rng, family, 1, 7, H, HV, K, V)
    flat = {n: inp[n][0] if n in ("q", "k", "v", "g", "beta") else inp[n] for n in inp}
    res = {}
    for be in ("reference", "cpu"):
        pool = replayssm.delta_pool(family, S, H, HV, K, V, L=4, T_max=2, act_dtype="fp32")
        o = replayssm.delta_prefill(family, flat["q"], flat["k"], flat["v"], flat["g"],
                                    flat["beta"], pool, cu, slots(3, 0), backend=be,
                                    **_kw(flat))
        res[be] = (o, pool.state)
    assert_close(res["cpu"][0], res["reference"][0], what="o")
    assert_close(res["cpu"][1], res["reference"][1], what="state")


def _conv_ref(hist, x, w, bias, silu):
    """Plain causal depthwise conv over history + x; hist [W-1, dim], x [T, dim]."""
    u = np.concatenate([hist, x]).astype(np.float64)
    W = w.shape[1]
    out = np.stack([(u[t:t + W] * w.T).sum(0) + bias for t in range(x.shape[0])])
    return out / (1 + np.exp(-out)) * (1 if silu else 0) + out * (0 if silu else 1)


def test_conv1d_update_and_rollback(rng):
    dim, W, T = 12, 4, 3
    pool = replayssm.conv1d_pool(S, dim, W, T_max=T, dtype="fp32")
    w = rng.standard_normal((dim, W)).astype(np.float32)
    bias = rng.standard_normal(dim).astype(np.float32)
    sl = slots(1, -1, 4)
    hist = np.zeros((3, W - 1, dim))
    acc = None
    for step in range(4):
        x = rng.standard_normal((3, T, dim)).astype(np.float32)
        res = {}
        for be in ("reference", "cpu"):
            p = replayssm.Conv1dPool(pool.state.copy(), pool.pending.copy())
            res[be] = (replayssm.conv1d_update(x, w, p, sl, acc, bias=bias, backend=be), p)
        out, pool = res["cpu"]
        assert_close(out, res["reference"][0], what="conv out")
        assert np.all(out[1] == 0)
        for b in (0, 2):
            assert_close(out[b], _conv_ref(hist[b], x[b], w, bias, True), what="conv math")
        acc = rng.integers(1, T + 1, 3).astype(np.int32)
        for b in (0, 2):
            u = np.concatenate([hist[b], x[b][:acc[b]]])
            hist[b] = u[-(W - 1):]


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_conv1d_commit_then_one_update(rng, dtype):
    """A batch mixing rows with pending drafts, fresh rows and a pad row:
    conv1d_commit of the pending rows, then one conv1d_update of every row
    without num_accepted, gives the bytes of the split calls (pending rows
    with num_accepted, fresh rows without) on every CPU backend."""
    dim, W, T_max, T = 24, 4, 5, 3
    pool = replayssm.conv1d_pool(S, dim, W, T_max=T_max, dtype=dtype)
    pool.state[...] = rng.uniform(-1, 1, pool.state.shape)
    pending = np.array([3, 0, 5, 1, 0, 2], np.int32)  # slots 1 and 4 fresh
    pool.pending[...] = pending
    sl = slots(2, 1, -1, 0, 5, 4, 3)
    acc = np.array([2, 9, 0, 3, 2, -1, 1], np.int32)  # junk on fresh and pad rows
    fresh = np.isin(sl, [1, 4])
    sl_pend = np.where(fresh, -1, sl).astype(np.int32)
    sl_fresh = np.where(fresh, sl, -1).astype(np.int32)
    xd = np.float32 if dtype == "fp32" else np.float16
    x = rng.standard_normal((len(sl), T, dim)).astype(xd)
    w = rng.standard_normal((dim, W)).astype(xd)
    bias = rng.standard_normal(dim).astype(xd)
    for be in ("reference", "cpu"):
        split = replayssm.Conv1dPool(pool.state.copy(), pool.pending.copy())
        out_p = replayssm.conv1d_update(x, w, split, sl_pend, acc, bias=bias, backend=be)
        out_f = replayssm.conv1d_update(x, w, split, sl_fresh, bias=bias, backend=be)
        want = np.where(fresh[:, None, None], out_f, out_p)

        one = replayssm.Conv1dPool(pool.state.copy(), pool.pending.copy())
        replayssm.conv1d_commit(one, sl_pend, acc, W=W, backend=be)
        assert np.array_equal(one.pending, np.zeros(S, np.int32))
        for s, a in zip(sl_pend, acc):  # rows [0, W-1) <- rows [a, a+W-1)
            if s >= 0:
                assert np.array_equal(one.state[s, :W - 1], pool.state[s, a:a + W - 1]), (be, s)
                assert np.array_equal(one.state[s, W - 1:], pool.state[s, W - 1:]), (be, s)
        for s in (1, 4):
            assert np.array_equal(one.state[s], pool.state[s])
        # An accepted count on a fresh row, or W < 2: rejected, nothing written.
        before = (one.state.copy(), one.pending.copy())
        with pytest.raises(replayssm.Error, match="num_accepted"):
            replayssm.conv1d_commit(one, slots(1), np.array([1], np.int32), W=W, backend=be)
        with pytest.raises(replayssm.Error, match="'W'"):
            replayssm.conv1d_commit(one, slots(0), np.array([1], np.int32), W=1, backend=be)
        assert one.state.tobytes() == before[0].tobytes()
        assert np.array_equal(one.pending, before[1])
        out = replayssm.conv1d_update(x, w, one, sl, bias=bias, backend=be)
        assert out.tobytes() == want.tobytes(), be
        assert one.state.tobytes() == split.state.tobytes(), be
        assert np.array_equal(one.pending, split.pending)
        assert np.array_equal(one.pending, np.full(S, T, np.int32))

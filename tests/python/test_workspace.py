"""Caller-provided scratch (Exec::workspace) through the binding: a call given
a workspace of *_workspace_bytes bytes matches the same call without one,
byte for byte; too small, misaligned, strided or device workspaces are
rejected naming 'workspace', before anything is written."""
import numpy as np
import pytest

import replayssm
from conftest import copy_pool, delta_inputs, mamba2_inputs, slots

ALIGN = replayssm.WORKSPACE_ALIGN


def _aligned(nbytes, offset=0):
    """A uint8 host array of nbytes whose first byte is ALIGN-aligned (+ offset)."""
    raw = np.zeros(nbytes + 2 * ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN + offset
    return raw[start:start + nbytes]


def _m2_step(rng, B=3, T=1, L=4):
    H, P, N, G = 4, 8, 16, 2
    pool = replayssm.mamba2_pool(6, H, P, N, G, L=L, T_max=3, act_dtype="fp32")
    inp = mamba2_inputs(rng, B, T, H, P, N, G)
    return pool, inp, (H, P, N, G)


def test_mamba2_replay_step_with_workspace_matches(rng):
    pool, inp, (H, P, N, G) = _m2_step(rng)
    sl = slots(4, 0, 2)
    need = replayssm.mamba2_workspace_bytes(op="replay_step", H=H, P=P, N=N, G=G, B=3, T=1, L=4,
                                            num_threads=2)
    assert need > 0
    assert replayssm.mamba2_workspace_bytes(op="replay_step", H=H, P=P, N=N, G=G, B=3, T=1, L=4,
                                            backend="reference") == 0
    ws = _aligned(need)
    ws[:] = 0xAB  # stale contents are never read
    outs, pools = [], []
    for w in (None, ws):
        p = copy_pool(pool)
        for _ in range(6):  # past a flush (L = 4)
            y = replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], p,
                                             sl, commit_all=True, z=inp["z"],
                                             dt_bias=inp["dt_bias"], D=inp["D"], backend="cpu",
                                             num_threads=2, workspace=w)
        outs.append(y)
        pools.append(p)
    assert np.array_equal(outs[0], outs[1])
    assert np.array_equal(pools[0].state, pools[1].state)


def test_delta_replay_step_with_workspace_matches(rng):
    H, HV, K, V = 2, 4, 16, 8
    pool = replayssm.delta_pool("gdn", 6, H, HV, K, V, L=4, T_max=2, act_dtype="fp32")
    inp = delta_inputs(rng, "gdn", 3, 1, H, HV, K, V)
    sl = slots(4, 0, 2)
    need = replayssm.delta_workspace_bytes(family="gdn", op="replay_step", H=H, HV=HV, K=K, V=V,
                                           B=3, T=1, L=4, num_threads=2)
    assert need > 0
    outs = []
    for w in (None, _aligned(need)):
        p = copy_pool(pool)
        for _ in range(6):
            o = replayssm.delta_replay_step("gdn", inp["q"], inp["k"], inp["v"], inp["g"],
                                            inp["beta"], p, sl, commit_all=True, backend="cpu",
                                            A_log=inp["A_log"], dt_bias=inp["dt_bias"],
                                            num_threads=2, workspace=w)
        outs.append((o, p.state))
    assert np.array_equal(outs[0][0], outs[1][0])
    assert np.array_equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("case", ["small", "misaligned", "strided"])
def test_bad_workspace_rejected_before_writing(rng, case):
    pool, inp, (H, P, N, G) = _m2_step(rng)
    need = replayssm.mamba2_workspace_bytes(op="replay_step", H=H, P=P, N=N, G=G, B=3, T=1, L=4,
                                            num_threads=2)
    ws = {"small": _aligned(need - 1), "misaligned": _aligned(need, offset=8),
          "strided": _aligned(2 * need)[::2]}[case]
    p = copy_pool(pool)
    y = np.full(inp["x"].shape, np.nan, np.float32)
    state0 = p.state.copy()
    with pytest.raises(replayssm.Error, match="workspace"):
        replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], p,
                                     slots(4, 0, 2), commit_all=True, y=y, z=inp["z"],
                                     dt_bias=inp["dt_bias"], D=inp["D"], backend="cpu",
                                     num_threads=2, workspace=ws)
    assert np.isnan(y).all()
    assert np.array_equal(p.state, state0)


def test_workspace_bytes_bad_op():
    with pytest.raises(replayssm.Error, match="'op'"):
        replayssm.mamba2_workspace_bytes(op="nope", H=4, P=8, N=16, G=2, B=1)
    with pytest.raises(replayssm.Error, match="'op'"):
        replayssm.conv1d_workspace_bytes(op="nope", B=1, dim=8, W=4)
    assert replayssm.conv1d_workspace_bytes(op="update", B=2, T=3, dim=8, W=4) >= 0
    assert replayssm.conv1d_workspace_bytes(op="commit", B=2, dim=8, W=4) == 0

"""Rejected calls raise replayssm.Error (a ValueError) with the library's
message naming the argument; nothing is written before validation."""
import numpy as np
import pytest

import replayssm
from conftest import mamba2_inputs, slots

H, P, N, G, S = 4, 8, 16, 2, 6


def _call(state, **over):
    rng = np.random.default_rng(0)
    inp = mamba2_inputs(rng, 2, 1, H, P, N, G, z=False)
    inp.update(over)
    return replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], state,
                                   over.get("slot", slots(0, 1)), dt_bias=inp["dt_bias"],
                                   backend="cpu")


def _expect(arg, state, **over):
    before = state.copy()
    with pytest.raises(replayssm.Error) as ei:
        _call(state, **over)
    assert f"'{arg}'" in str(ei.value), str(ei.value)
    assert np.array_equal(state, before), "state written by a rejected call"
    return str(ei.value)


def test_error_is_value_error():
    assert issubclass(replayssm.Error, ValueError)


def test_bad_dtype():
    st = np.zeros((S, H, P, N), np.float32)
    msg = _expect("x", st, x=np.zeros((2, 1, H, P), np.float64))
    assert "expected" in msg and "got" in msg
    _expect("A", st, A=np.zeros(H, np.float16))
    _expect("state", np.zeros((S, H, P, N), np.int32))


def test_bad_shape():
    st = np.zeros((S, H, P, N), np.float32)
    # the library names B and C of the model 'Bm' and 'Cm' (include/replayssm/mamba2.h)
    _expect("Cm", st, C=np.zeros((2, 1, G, N + 1), np.float32))
    _expect("Bm", st, B=np.zeros((2, 1, G + 1, N), np.float32))
    _expect("A", st, A=np.zeros(H + 1, np.float32))
    _expect("state", np.zeros((S, H, P + 1, N), np.float32))


def test_bad_stride():
    st = np.zeros((S, H, P, N), np.float32)
    x = np.zeros((2, 1, H, 2 * P), np.float32)[..., ::2]
    _expect("x", st, x=x)


def test_bad_slot():
    st = np.zeros((S, H, P, N), np.float32)
    _expect("slot", st, slot=slots(0, S))
    _expect("slot", st, slot=slots(1, 1))
    _expect("slot", st, slot=np.zeros(2, np.float32))


def test_bad_backend_and_accepted(rng):
    st = np.zeros((S, H, P, N), np.float32)
    with pytest.raises(replayssm.Error, match="backend"):
        inp = mamba2_inputs(rng, 2, 1, H, P, N, G, z=False)
        replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], st,
                                slots(0, 1), backend="tpu")
    pool = replayssm.mamba2_pool(S, H, P, N, G, L=4, T_max=2, act_dtype="fp32")
    inp = mamba2_inputs(rng, 2, 2, H, P, N, G, z=False)
    # accepted counts without pending records
    with pytest.raises(replayssm.Error, match="num_accepted"):
        replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], pool,
                                     slots(0, 1), slots(1, 1), backend="cpu")
    replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], pool,
                                 slots(0, 1), backend="cpu")
    cursor = pool.cursor.copy()
    with pytest.raises(replayssm.Error, match="num_accepted"):
        replayssm.mamba2_commit(pool, slots(0, 1), slots(1, 3), backend="cpu")
    assert np.array_equal(pool.cursor, cursor)


def test_non_array_argument_is_type_error():
    st = np.zeros((S, H, P, N), np.float32)
    with pytest.raises(TypeError):
        _call(st, x=[1.0, 2.0])


def test_cuda_backend_with_cpu_arrays():
    st = np.zeros((S, H, P, N), np.float32)
    rng = np.random.default_rng(0)
    inp = mamba2_inputs(rng, 2, 1, H, P, N, G, z=False)
    with pytest.raises(replayssm.Error):
        replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], st,
                                slots(0, 1), backend="cuda")


def test_sizing():
    L, T = 16, 5
    R = replayssm.ring_length(L, T)
    assert R == L + T
    b = replayssm.mamba2_bytes_per_row(64, 64, 128, 8, state_dtype="fp32", act_dtype="bf16",
                                       L=L, T_max=T)
    assert b >= 64 * 64 * 128 * 4 + R * (64 * 64 * 2 + 64 * 4 + 8 * 128 * 2)
    snap = replayssm.mamba2_bytes_per_row(64, 64, 128, 8, mode="snapshot", L=L, T_max=T)
    assert snap == T * 64 * 64 * 128 * 4
    d = replayssm.delta_bytes_per_row("gdn", 16, 32, 128, 128, L=L, T_max=T)
    assert d >= 32 * 128 * 128 * 4
    with pytest.raises(replayssm.Error, match="state_dtype"):
        replayssm.mamba2_bytes_per_row(1, 1, 1, 1, state_dtype="int8")


def test_dlpack_capsules_zero_copy(rng):
    """The extension takes DLPack capsules (the form the torch / cupy CUDA path
    passes) and writes through them into the producer's memory."""
    from replayssm import _C

    inp = mamba2_inputs(rng, 2, 1, H, P, N, G, z=False)
    st = np.zeros((S, H, P, N), np.float32)
    y = np.full(inp["x"].shape, np.nan, np.float32)
    ref = replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"],
                                  st.copy(), slots(0, 3), backend="cpu")
    _C.mamba2_decode(x=inp["x"].__dlpack__(), dt=inp["dt"].__dlpack__(), B=inp["B"].__dlpack__(),
                     C=inp["C"].__dlpack__(), A=inp["A"].__dlpack__(), y=y.__dlpack__(),
                     slot=slots(0, 3).__dlpack__(), state=st.__dlpack__(), backend="cpu",
                     stream=0)
    assert np.array_equal(y, ref)
    assert not np.all(st[[0, 3]] == 0)

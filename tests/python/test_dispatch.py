"""The dispatcher's torch path without torch: a call that would go to a torch
custom op (torch.ops.replayssm.*) passes only arguments its schema
(replayssm._schemas) declares, every argument the schema requires, and gives
what the direct path gives. test_torch.py runs the real ops where torch is
installed; CI has none, so this stands in for their argument lists there (a
`workspace=None` passed on to the ops broke every torch call once)."""
import re
import types

import numpy as np
import pytest

import replayssm
from conftest import copy_pool, delta_inputs, mamba2_inputs, slots
from replayssm import _api, _dispatch
from replayssm._schemas import SCHEMAS, arg_names


def _required(schema):
    """Names of the schema's arguments with no default that are not optional."""
    return [arg_names(a)[0] for a in schema.split(",")
            if a.strip() != "*" and "=" not in a and "?" not in a.split()[0]]


class _FakeOps:
    """torch.ops.replayssm stand-in: checks the keywords against the schema,
    then runs the call on the cpu backend as the real op would."""

    def __init__(self):
        self.names = []

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)

        def op(**kw):
            schema = SCHEMAS[name]
            unknown = sorted(set(kw) - set(arg_names(schema)))
            assert not unknown, f"{name}: arguments its torch op does not declare: {unknown}"
            missing = [a for a in _required(schema) if kw.get(a) is None]
            assert not missing, f"{name}: required arguments not passed: {missing}"
            self.names.append(name)
            args = {k: v for k, v in kw.items() if v is not None}
            args["backend"] = args.get("backend") or "cpu"
            getattr(replayssm._C, name)(stream=0, **args)

        return op


def _route_through_fake_ops(monkeypatch):
    """Send every later call down the torch-op branch of _dispatch.call."""
    ops = _FakeOps()
    monkeypatch.setattr(_dispatch, "is_torch", lambda a: True)
    monkeypatch.setattr(_dispatch, "_ops_loaded", True)
    monkeypatch.setattr(_dispatch, "_torch", types.SimpleNamespace(
        ops=types.SimpleNamespace(replayssm=ops)))
    return ops


def test_schemas_take_the_exec_arguments():
    """_api._exec's keywords reach every op except stream and workspace,
    which the dispatcher drops on the torch path."""
    passed = set(_api._exec({}, None, None, 0, None)) - {"stream", "workspace"}
    for name, schema in SCHEMAS.items():
        assert passed <= set(arg_names(schema)), name
        assert not re.search(r"\bstream\b|\bworkspace\b", schema), name


def _mamba2_calls(rng):
    H, P, N, G = 4, 8, 16, 2
    pool = replayssm.mamba2_pool(6, H, P, N, G, L=4, T_max=2, act_dtype="fp32")
    inp = mamba2_inputs(rng, 3, 2, H, P, N, G)
    sl = slots(4, -1, 2)
    acc = np.array([1, 1, 2], np.int32)

    def run(p):
        outs = []
        y = np.zeros_like(inp["x"])
        for step in range(5):  # past a flush (L = 4), with commits
            replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], p,
                                         sl, acc if step else None, z=inp["z"],
                                         dt_bias=inp["dt_bias"], D=inp["D"], y=y)
            outs.append(y.copy())
        replayssm.mamba2_commit(p, sl, acc)
        m = np.zeros((3, H, P, N), np.float32)
        replayssm.mamba2_materialize(p, sl, m, A=inp["A"])
        outs.append(m)
        st = np.zeros((6, H, P, N), np.float32)
        y1 = np.zeros_like(inp["x"][:, :1])
        replayssm.mamba2_decode(*(inp[k][:, :1] for k in ("x", "dt")), inp["A"],
                                inp["B"][:, :1], inp["C"][:, :1], st, sl, y=y1)
        outs.append(y1)
        return outs

    return pool, run


def _delta_calls(rng):
    H, HV, K, V = 2, 4, 16, 8
    pool = replayssm.delta_pool("kda", 6, H, HV, K, V, L=4, T_max=1, act_dtype="fp32")
    inp = delta_inputs(rng, "kda", 3, 1, H, HV, K, V)
    sl = slots(0, 5, -1)

    def run(p):
        outs = []
        o = np.zeros_like(inp["v"])
        for _ in range(5):
            replayssm.delta_replay_step("kda", inp["q"], inp["k"], inp["v"], inp["g"],
                                        inp["beta"], p, sl, commit_all=True, o=o,
                                        A_log=inp["A_log"], dt_bias=inp["dt_bias"])
            outs.append(o.copy())
        return outs

    return pool, run


def _conv1d_calls(rng):
    dim, W = 12, 4
    pool = replayssm.conv1d_pool(5, dim, W, T_max=2, dtype="fp32")
    x = rng.standard_normal((2, 2, dim)).astype(np.float32)
    w = rng.standard_normal((dim, W)).astype(np.float32)
    sl = slots(3, 1)

    def run(p):
        out = np.zeros_like(x)
        replayssm.conv1d_update(x, w, p, sl, out=out)
        first = out.copy()
        replayssm.conv1d_commit(p, sl, np.array([2, 1], np.int32), W=W)
        replayssm.conv1d_update(x, w, p, sl, out=out)
        return [first, out.copy()]

    return pool, run


@pytest.mark.parametrize("calls", [_mamba2_calls, _delta_calls, _conv1d_calls])
def test_torch_path_matches_direct_path(rng, calls, monkeypatch):
    pool, run = calls(rng)
    direct_pool = copy_pool(pool)
    direct = run(direct_pool)
    ops = _route_through_fake_ops(monkeypatch)
    through_ops = run(pool)
    assert ops.names, "no call took the torch path"
    assert np.any(direct[0] != 0)
    for a, b in zip(direct, through_ops):
        assert np.array_equal(a, b)
    for f in ("state", "cursor", "pending"):
        if hasattr(pool, f) and getattr(pool, f) is not None:
            assert np.array_equal(getattr(pool, f), getattr(direct_pool, f)), f


class _CudaTensor:
    """A CUDA torch.Tensor stand-in on the direct path (DLPack device cuda:1)."""

    def __init__(self):
        self.device = "cuda:1"

    def __dlpack_device__(self):
        return (2, 1)

    def __dlpack__(self, stream=None):
        return self


_CudaTensor.__module__ = "torch"


def test_direct_torch_calls_use_torchs_stream_and_the_tensors_device(monkeypatch):
    """Torch tensors on the direct path (dual / shared modes, a workspace)
    run on torch's current stream of their device with that device current,
    as the torch ops do (they once went to stream 0 on whatever device was
    current)."""
    current = {"dev": "cuda:0"}
    seen = {}

    class _Device:
        def __init__(self, dev):
            self.dev = dev

        def __enter__(self):
            self.prev, current["dev"] = current["dev"], self.dev

        def __exit__(self, *exc):
            current["dev"] = self.prev

    streams = {"cuda:0": 11, "cuda:1": 1234}
    monkeypatch.setattr(_dispatch, "is_torch", lambda a: isinstance(a, _CudaTensor))
    monkeypatch.setattr(_dispatch, "_torch", types.SimpleNamespace(cuda=types.SimpleNamespace(
        current_stream=lambda dev: types.SimpleNamespace(cuda_stream=streams[dev]), device=_Device)))
    monkeypatch.setattr(_dispatch, "_C", types.SimpleNamespace(
        mamba2_decode_shared=lambda **kw: seen.update(kw, dev=current["dev"])))
    t = _CudaTensor()
    _dispatch.call("mamba2_decode_shared", {"x": t, "stream": None, "backend": None}, t)
    assert seen["stream"] == 1234 and seen["backend"] == "cuda" and seen["dev"] == "cuda:1"
    assert current["dev"] == "cuda:0"


def _fake_cupy(monkeypatch):
    """A cupy stand-in: arrays remember the device current when they were
    allocated; cuda.Device(i) makes device i current within a `with`."""
    current = {"dev": 0}

    class Device:
        def __init__(self, i):
            self.id, self.prev = int(i), None

        def __enter__(self):
            self.prev, current["dev"] = current["dev"], self.id

        def __exit__(self, *exc):
            current["dev"] = self.prev

    class ndarray:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), dtype
            self.device = Device(current["dev"])

        def __dlpack_device__(self):
            return (2, self.device.id)  # kDLCUDA, as a cupy array reports

    ndarray.__module__ = "cupy"
    mod = types.ModuleType("cupy")
    mod.ndarray = ndarray
    mod.empty = mod.zeros = lambda shape, dtype=None: ndarray(shape, dtype)
    mod.arange = lambda n, dtype=None: ndarray((n,), dtype)
    mod.cuda = types.SimpleNamespace(Device=Device)
    monkeypatch.setitem(__import__("sys").modules, "cupy", mod)
    return mod, current


def test_cupy_allocations_on_the_arrays_device(monkeypatch):
    """Outputs the dispatcher allocates for a cupy array (y, arange) and
    cupy pools with a device land on that device, not on cupy's current one
    (they once went to the current device)."""
    from replayssm import pools

    cp, current = _fake_cupy(monkeypatch)
    with cp.cuda.Device(1):
        x = cp.empty((2, 3), "float32")
    assert x.device.id == 1 and current["dev"] == 0
    assert _dispatch.empty_like(x).device.id == 1
    assert _dispatch.arange(x, 4).device.id == 1
    assert pools._zeros("cupy", (2,), "fp32", 1).device.id == 1
    assert pools._zeros("cupy", (2,), "fp32", None).device.id == 0
    assert current["dev"] == 0

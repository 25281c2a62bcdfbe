"""torch integration: custom ops on CPU tensors, and on a GPU the cuda
backend against the reference, a torch.compile'd call, a CUDA-graph
capture, bf16, and the adapters. Skipped without torch / without CUDA."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import replayssm  # noqa: E402
from replayssm import adapters  # noqa: E402
from conftest import assert_close, mamba2_inputs  # noqa: E402

H, P, N, G, S = 4, 16, 32, 2, 8
cuda = pytest.mark.skipif(not (torch.cuda.is_available() and replayssm.cuda_available()),
                          reason="needs a CUDA device and a CUDA build of replayssm")


def _t(inp, device, dtype=None):
    out = {}
    for k, v in inp.items():
        if v is None:
            out[k] = None
            continue
        t = torch.from_numpy(np.ascontiguousarray(v)).to(device)
        if dtype is not None and k in ("x", "B", "C", "z"):
            t = t.to(dtype)
        out[k] = t
    return out


def _decode(inp, state, slot, **kw):
    return replayssm.mamba2_decode(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], state,
                                   slot, z=inp["z"], dt_bias=inp["dt_bias"], D=inp["D"], **kw)


def test_ops_registered_and_cpu_tensors(rng):
    replayssm.load_torch_ops()
    assert hasattr(torch.ops.replayssm, "mamba2_decode")
    inp = mamba2_inputs(rng, 3, 2, H, P, N, G)
    st_np = rng.standard_normal((S, H, P, N)).astype(np.float32)
    slot = np.array([1, -1, 6], np.int32)
    y_ref = _decode(inp, st_np.copy(), slot, backend="reference")
    st = torch.from_numpy(st_np.copy())
    y = _decode(_t(inp, "cpu"), st, torch.from_numpy(slot))
    assert isinstance(y, torch.Tensor)
    assert_close(y.numpy(), y_ref, what="y")


def test_errors_through_torch_op(rng):
    inp = _t(mamba2_inputs(rng, 2, 1, H, P, N, G), "cpu")
    st = torch.zeros(S, H, P, N)
    with pytest.raises(replayssm.Error, match="'x'"):
        inp["x"] = inp["x"].double()
        _decode(inp, st, torch.tensor([0, 1], dtype=torch.int32))


def test_conv1d_commit_torch_op(rng):
    """conv1d_commit through torch.ops.replayssm on CPU tensors: the same bytes
    as the numpy call; a fresh row's accepted count raises."""
    dim, W, T_max = 16, 4, 3
    st_np = rng.standard_normal((S, W - 1 + T_max, dim)).astype(np.float32)
    pend_np = np.array([2, 0, 3, 1, 0, 0, 3, 2], np.int32)
    slot, acc = np.array([0, -1, 2, 3], np.int32), np.array([1, 0, 3, 1], np.int32)
    ref = replayssm.Conv1dPool(st_np.copy(), pend_np.copy())
    replayssm.conv1d_commit(ref, slot, acc, W=W, backend="cpu")
    pool = replayssm.Conv1dPool(torch.from_numpy(st_np.copy()), torch.from_numpy(pend_np.copy()))
    replayssm.conv1d_commit(pool, torch.from_numpy(slot), torch.from_numpy(acc), W=W)
    assert np.array_equal(pool.state.numpy(), ref.state)
    assert np.array_equal(pool.pending.numpy(), ref.pending)
    with pytest.raises(replayssm.Error, match="'num_accepted'"):
        replayssm.conv1d_commit(pool, torch.tensor([1], dtype=torch.int32),
                                torch.tensor([1], dtype=torch.int32), W=W)


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_decode_matches_reference(rng, dtype):
    inp = mamba2_inputs(rng, 3, 2, H, P, N, G)
    st_np = rng.standard_normal((S, H, P, N)).astype(np.float32)
    slot = np.array([1, -1, 6], np.int32)
    ti = _t(inp, "cuda", dtype)
    ref_inp = {k: (None if v is None else v.float().cpu().numpy()) for k, v in ti.items()}
    st_ref = st_np.copy()
    y_ref = _decode(ref_inp, st_ref, slot, backend="reference")
    st = torch.from_numpy(st_np.copy()).cuda()
    y = _decode(ti, st, torch.from_numpy(slot).cuda())
    torch.cuda.synchronize()
    assert y.dtype == dtype
    tol = "float32" if dtype == torch.float32 else "float16"
    assert_close(y.float().cpu().numpy(), y_ref, tol, "y")
    assert_close(st.cpu().numpy(), st_ref, tol, "state")
    assert torch.all(y[1] == 0)


@cuda
def test_cuda_on_side_stream(rng):
    inp = _t(mamba2_inputs(rng, 2, 1, H, P, N, G), "cuda")
    st = torch.zeros(S, H, P, N, device="cuda")
    slot = torch.tensor([0, 3], dtype=torch.int32, device="cuda")
    ref = _decode(inp, st.clone(), slot)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = _decode(inp, st, slot)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.allclose(y, ref)


@cuda
def test_torch_compile(rng):
    inp = _t(mamba2_inputs(rng, 2, 1, H, P, N, G), "cuda")
    slot = torch.tensor([2, 5], dtype=torch.int32, device="cuda")
    st_eager = torch.randn(S, H, P, N, device="cuda")
    st_comp = st_eager.clone()

    def f(x, dt, A, B, C, z, dt_bias, D, state, slot):
        y = replayssm.mamba2_decode(x, dt, A, B, C, state, slot, z=z, dt_bias=dt_bias, D=D)
        return y * 2.0

    args = [inp[k] for k in ("x", "dt", "A", "B", "C", "z", "dt_bias", "D")]
    y_eager = f(*args, st_eager, slot)
    y_comp = torch.compile(f, fullgraph=True)(*args, st_comp, slot)
    torch.cuda.synchronize()
    assert torch.allclose(y_comp, y_eager, rtol=1e-5, atol=1e-5)
    assert torch.allclose(st_comp, st_eager, rtol=1e-5, atol=1e-5)


@cuda
def test_cuda_graph_capture_replay_step(rng):
    """Capture a plain-decode replay step (commit_all) and replay the graph:
    outputs equal the baseline decode run eagerly on a copy."""
    L = 4
    pool = replayssm.mamba2_pool(S, H, P, N, G, L=L, T_max=1, act_dtype="fp32", lib="torch",
                                 device="cuda")
    inp = _t(mamba2_inputs(rng, 2, 1, H, P, N, G), "cuda")
    slot = torch.tensor([1, 4], dtype=torch.int32, device="cuda")
    y = torch.empty_like(inp["x"])
    base = torch.zeros(S, H, P, N, device="cuda")

    def step():
        replayssm.mamba2_replay_step(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], pool,
                                     slot, commit_all=True, z=inp["z"], dt_bias=inp["dt_bias"],
                                     D=inp["D"], y=y)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up (one real step)
        step()
    torch.cuda.current_stream().wait_stream(s)
    ref = _decode(inp, base, slot)
    assert torch.allclose(y, ref, rtol=1e-4, atol=1e-4)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    for i in range(2 * L):
        new = _t(mamba2_inputs(rng, 2, 1, H, P, N, G), "cuda")
        for k in ("x", "dt", "B", "C", "z"):
            inp[k].copy_(new[k])
        g.replay()
        ref = _decode(inp, base, slot)
        torch.cuda.synchronize()
        assert torch.allclose(y, ref, rtol=1e-4, atol=1e-4), f"graph replay {i}"


@cuda
def test_adapters_on_gpu_with_graph(rng):
    Bsz = 3
    A = (-torch.rand(H, device="cuda") - 0.5)[:, None, None].expand(H, P, N)
    dt = torch.rand(Bsz, H, device="cuda")[:, :, None].expand(Bsz, H, P)
    bias = torch.zeros(H, device="cuda")[:, None].expand(H, P)
    x = torch.randn(Bsz, H, P, device="cuda", dtype=torch.bfloat16)
    Bm = torch.randn(Bsz, G, N, device="cuda", dtype=torch.bfloat16)
    Cm = torch.randn(Bsz, G, N, device="cuda", dtype=torch.bfloat16)
    idx = torch.tensor([3, -1, 0], dtype=torch.int32, device="cuda")
    st = torch.zeros(S, H, P, N, device="cuda")
    out = torch.empty_like(x)
    ref_state = st.clone()
    adapters.selective_state_update(ref_state, x, dt, A, Bm, Cm, dt_bias=bias, dt_softplus=True,
                                    state_batch_indices=idx, out=out)
    ref = out.clone()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        adapters.selective_state_update(st.clone(), x, dt, A, Bm, Cm, dt_bias=bias,
                                        dt_softplus=True, state_batch_indices=idx, out=out)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        adapters.selective_state_update(st, x, dt, A, Bm, Cm, dt_bias=bias, dt_softplus=True,
                                        state_batch_indices=idx, out=out)
    g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(out.float(), ref.float(), rtol=1e-2, atol=1e-2)
    assert torch.allclose(st, ref_state, rtol=1e-4, atol=1e-4)

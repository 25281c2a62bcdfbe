"""Engine adapters against pure-numpy implementations of the engines'
documented semantics (written here from the semantics, fp64):

* vLLM Mamba-2 ``selective_state_update`` (multi-head form): state pool
  [slots, H, P, N] addressed through state_batch_indices, pad rows skipped
  (vLLM leaves their output untouched: only non-pad rows are compared),
  dt += dt_bias then softplus (x if x > 20 else log1p(exp(x))) when
  dt_softplus, state = exp(dt·A)·state + dt·B·x, out = state·C + D·x,
  out *= z·sigmoid(z); A, dt, dt_bias, D tied per head (stride-0 views).
* vLLM GDN decode ``fused_recurrent_gated_delta_rule``: pool [slots, HV, V, K],
  g the log-decay, beta already activated, optional in-kernel L2 norm of q
  and k (x / sqrt(Σx² + 1e-6)), q scaled by scale (default K^-1/2);
  ssm_state_indices [N] (final state written to the row's slot) or [N, T]
  (spec decode: start from column num_accepted_tokens - 1, state after token
  t written to column t); cu_seqlens packs N equal-length sequences.
"""
import numpy as np
import pytest

import replayssm
from replayssm import adapters
from conftest import assert_close

H, P, N, G, S = 4, 8, 16, 2, 7
HK, HV, K, V = 2, 4, 16, 8


def _softplus(x):
    return np.where(x <= 20.0, np.log1p(np.exp(np.minimum(x, 20.0))), x)


def vllm_selective_state_update(state, x, dt, A, B, C, D, z, dt_bias, dt_softplus, idx, pad):
    out = np.zeros(x.shape, np.float64)
    ratio = x.shape[1] // B.shape[1]
    for b in range(x.shape[0]):
        s = b if idx is None else int(idx[b])
        if s == pad:
            continue
        d = dt[b].astype(np.float64) + (0 if dt_bias is None else dt_bias)
        if dt_softplus:
            d = _softplus(d)
        Bh = np.repeat(B[b].astype(np.float64), ratio, axis=0)  # [H, N]
        Ch = np.repeat(C[b].astype(np.float64), ratio, axis=0)
        dA = np.exp(d[..., None] * A)  # [H, P, N]
        st = state[s].astype(np.float64) * dA + (d * x[b])[..., None] * Bh[:, None, :]
        state[s] = st
        y = (st * Ch[:, None, :]).sum(-1)
        if D is not None:
            y = y + x[b] * D
        if z is not None:
            y = y * z[b] / (1 + np.exp(-z[b].astype(np.float64)))
        out[b] = y
    return out


def _tied(rng, Bsz):
    A_h = -np.exp(rng.uniform(-1, 1.5, H)).astype(np.float32)
    A = np.broadcast_to(A_h[:, None, None], (H, P, N))
    dt_h = rng.uniform(-3, 1, (Bsz, H)).astype(np.float32)
    dt = np.broadcast_to(dt_h[:, :, None], (Bsz, H, P))
    bias = np.broadcast_to(rng.uniform(-.5, .5, H).astype(np.float32)[:, None], (H, P))
    D = np.broadcast_to(rng.standard_normal(H).astype(np.float32)[:, None], (H, P))
    return A, dt, bias, D


@pytest.mark.parametrize("softplus", [True, False])
def test_selective_state_update_matches_vllm(rng, softplus):
    Bsz = 4
    A, dt, bias, D = _tied(rng, Bsz)
    if not softplus:
        dt = np.broadcast_to(np.abs(dt[..., :1]) * 0.3, dt.shape)
    x = rng.standard_normal((Bsz, H, P)).astype(np.float32)
    Bm = rng.standard_normal((Bsz, G, N)).astype(np.float32)
    Cm = rng.standard_normal((Bsz, G, N)).astype(np.float32)
    z = rng.standard_normal((Bsz, H, P)).astype(np.float32)
    idx = np.array([5, -1, 0, 2], np.int32)
    st0 = rng.standard_normal((S, H, P, N)).astype(np.float32)
    ref_state = st0.astype(np.float64)
    ref = vllm_selective_state_update(ref_state, x, dt, A, Bm, Cm, D, z, bias, softplus, idx, -1)
    st = st0.copy()
    out = adapters.selective_state_update(st, x, dt, A, Bm, Cm, D=D, z=z, dt_bias=bias,
                                          dt_softplus=softplus, state_batch_indices=idx,
                                          pad_slot_id=-1, backend="cpu")
    rows = [0, 2, 3]  # the rows the engine uses; pad row 1 is zero here
    assert_close(out[rows], ref[rows], what="out")
    assert np.all(out[1] == 0)
    assert_close(st, ref_state, what="state")
    # without indices: row b uses slot b
    st = st0.copy()
    ref_state = st0.astype(np.float64)
    ref = vllm_selective_state_update(ref_state, x, dt, A, Bm, Cm, None, None, None, softplus,
                                      None, -1)
    out = adapters.selective_state_update(st, x, dt, A, Bm, Cm, dt_softplus=softplus)
    assert_close(out, ref, what="out (no indices)")
    assert_close(st, ref_state, what="state (no indices)")


def test_selective_state_update_rejects_untied(rng):
    A, dt, bias, D = _tied(rng, 2)
    x = np.zeros((2, H, P), np.float32)
    Bm = np.zeros((2, G, N), np.float32)
    st = np.zeros((S, H, P, N), np.float32)
    with pytest.raises(replayssm.Error, match="'A'"):
        adapters.selective_state_update(st, x, dt, np.ascontiguousarray(A), Bm, Bm)
    with pytest.raises(replayssm.Error, match="'dt'"):
        adapters.selective_state_update(st, x, np.ascontiguousarray(dt), A, Bm, Bm)


def test_selective_state_update_replay_matches_vllm(rng):
    """Plain decode (T = 1) then speculative windows: the replay adapter's
    outputs equal vLLM's selective_state_update on the accepted stream."""
    Bsz, T = 3, 3
    pool = replayssm.mamba2_pool(S, H, P, N, G, L=4, T_max=T, act_dtype="fp32")
    idx = np.array([6, -1, 1], np.int32)
    A, _, bias, D = _tied(rng, Bsz)
    ref_state = np.zeros((S, H, P, N))
    rows = [0, 2]
    for step in range(5):  # plain decode, crosses a flush
        _, dt, _, _ = _tied(rng, Bsz)
        x = rng.standard_normal((Bsz, H, P)).astype(np.float32)
        Bm, Cm = (rng.standard_normal((Bsz, G, N)).astype(np.float32) for _ in range(2))
        ref = vllm_selective_state_update(ref_state, x, dt, A, Bm, Cm, D, None, bias, True,
                                          idx, -1)
        out = adapters.selective_state_update_replay(pool, x, dt, A, Bm, Cm, D=D, dt_bias=bias,
                                                     dt_softplus=True, state_batch_indices=idx)
        assert_close(out[rows], ref[rows], what=f"decode step {step}")
    acc = np.ones(Bsz, np.int32)  # rows fresh from plain decode ignore it
    for step in range(4):
        dt_h = rng.uniform(-3, 1, (Bsz, T, H)).astype(np.float32)
        dt = np.broadcast_to(dt_h[..., None], (Bsz, T, H, P))
        x = rng.standard_normal((Bsz, T, H, P)).astype(np.float32)
        Bm, Cm = (rng.standard_normal((Bsz, T, G, N)).astype(np.float32) for _ in range(2))
        out = adapters.selective_state_update_replay(pool, x, dt, A, Bm, Cm, D=D, dt_bias=bias,
                                                     dt_softplus=True, state_batch_indices=idx,
                                                     num_accepted_tokens=acc)
        acc = rng.integers(1, T + 1, Bsz).astype(np.int32)
        run = ref_state.copy()
        for t in range(T):
            ref = vllm_selective_state_update(run, x[:, t], dt[:, t], A, Bm[:, t], Cm[:, t], D,
                                              None, bias, True, idx, -1)
            assert_close(out[rows, t], ref[rows], what=f"spec step {step} token {t}")
            for b in rows:
                if t == acc[b] - 1:
                    ref_state[idx[b]] = run[idx[b]]


def _l2(a):
    return a / np.sqrt((a * a).sum(-1, keepdims=True) + 1e-6)


def vllm_gdn(q, k, v, g, beta, scale, state, idx, num_acc, l2norm):
    """q, k [N, T, HK, K]; v [N, T, HV, V]; g, beta [N, T, HV]; state [slots, HV, V, K]."""
    Nr, T = q.shape[:2]
    ratio = v.shape[2] // q.shape[2]
    o = np.zeros(v.shape, np.float64)
    for n in range(Nr):
        if idx is None:
            s0 = n
        elif idx.ndim == 1:
            s0 = int(idx[n])
        else:
            s0 = int(idx[n, (1 if num_acc is None else num_acc[n]) - 1])
        if s0 == -1:
            continue
        h = state[s0].astype(np.float64)
        for t in range(T):
            qt = np.repeat(q[n, t].astype(np.float64), ratio, axis=0)
            kt = np.repeat(k[n, t].astype(np.float64), ratio, axis=0)
            if l2norm:
                qt, kt = _l2(qt), _l2(kt)
            qt = qt * scale
            h = h * np.exp(g[n, t])[:, None, None]
            d = beta[n, t][:, None] * (v[n, t] - (h * kt[:, None, :]).sum(-1))
            h = h + d[:, :, None] * kt[:, None, :]
            o[n, t] = (h * qt[:, None, :]).sum(-1)
            if idx is not None and idx.ndim == 2:
                state[int(idx[n, t])] = h
        if idx is None or idx.ndim == 1:
            state[s0] = h
    return o


def _gdn_inputs(rng, Nr, T):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return (f(Nr, T, HK, K), f(Nr, T, HK, K), f(Nr, T, HV, V),
            -rng.uniform(0.01, 2.0, (Nr, T, HV)).astype(np.float32),
            rng.uniform(0.1, 0.9, (Nr, T, HV)).astype(np.float32))


@pytest.mark.parametrize("l2norm", [True, False])
def test_gdn_decode_matches_vllm(rng, l2norm):
    q, k, v, g, beta = _gdn_inputs(rng, 3, 1)
    st0 = (0.1 * rng.standard_normal((S, HV, V, K))).astype(np.float32)
    idx = np.array([4, -1, 0], np.int32)
    ref_state = st0.astype(np.float64)
    ref = vllm_gdn(q, k, v, g, beta, K ** -0.5, ref_state, idx, None, l2norm)
    st = st0.copy()
    # vLLM layout: batch 1 with cu_seqlens
    cu = np.array([0, 1, 2, 3], np.int32)
    o, fin = adapters.fused_recurrent_gated_delta_rule(
        q.reshape(1, 3, HK, K), k.reshape(1, 3, HK, K), v.reshape(1, 3, HV, V),
        g.reshape(1, 3, HV), beta.reshape(1, 3, HV), initial_state=st, cu_seqlens=cu,
        ssm_state_indices=idx, use_qk_l2norm_in_kernel=l2norm)
    assert fin is st and o.shape == (1, 3, HV, V)
    assert_close(o[0, [0, 2]], ref[[0, 2], 0], what="o")
    assert np.all(o[0, 1] == 0)
    assert_close(st, ref_state, what="state")


def test_gdn_spec_decode_matches_vllm(rng):
    Nr, T = 2, 3
    q, k, v, g, beta = _gdn_inputs(rng, Nr, T)
    st0 = (0.1 * rng.standard_normal((S, HV, V, K))).astype(np.float32)
    idx = np.array([[0, 1, 2], [3, 4, 5]], np.int32)
    acc = np.array([2, 3], np.int32)
    ref_state = st0.astype(np.float64)
    ref = vllm_gdn(q, k, v, g, beta, 0.3, ref_state, idx, acc, True)
    st = st0.copy()
    o, _ = adapters.fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=0.3,
                                                     initial_state=st, ssm_state_indices=idx,
                                                     num_accepted_tokens=acc,
                                                     use_qk_l2norm_in_kernel=True)
    assert_close(o, ref, what="o")
    assert_close(st, ref_state, what="state")


def test_gdn_replay_matches_vllm_on_accepted_stream(rng):
    Nr, T = 2, 3
    pool = replayssm.delta_pool("gdn", S, HK, HV, K, V, L=4, T_max=T, act_dtype="fp32")
    slot = np.array([3, 5], np.int32)
    ref_state = np.zeros((S, HV, V, K))
    for step in range(3):  # plain decode
        q, k, v, g, beta = _gdn_inputs(rng, Nr, 1)
        ref = vllm_gdn(q, k, v, g, beta, K ** -0.5, ref_state, slot, None, True)
        o = adapters.fused_recurrent_gated_delta_rule_replay(q, k, v, g, beta, None, pool, slot,
                                                             use_qk_l2norm_in_kernel=True)
        assert_close(o, ref, what=f"decode {step}")
    acc = np.ones(Nr, np.int32)
    for step in range(4):  # speculative windows with the engine's accepted counts
        q, k, v, g, beta = _gdn_inputs(rng, Nr, T)
        o = adapters.fused_recurrent_gated_delta_rule_replay(q, k, v, g, beta, None, pool, slot,
                                                             num_accepted_tokens=acc,
                                                             use_qk_l2norm_in_kernel=True)
        acc = rng.integers(1, T + 1, Nr).astype(np.int32)
        snap = np.full((Nr, T), -1, np.int32)
        tmp = np.zeros((Nr * T + 1, HV, V, K))
        for n in range(Nr):
            tmp[n * T] = ref_state[slot[n]]
            snap[n] = np.arange(n * T, n * T + T)
        ref = vllm_gdn(q, k, v, g, beta, K ** -0.5, tmp, snap, np.ones(Nr, np.int32), True)
        assert_close(o, ref, what=f"spec {step}")
        for n in range(Nr):
            ref_state[slot[n]] = tmp[snap[n, acc[n] - 1]]


def test_admit_slots(rng):
    pool = replayssm.delta_pool("gdn", S, HK, HV, K, V, L=4, T_max=2, act_dtype="fp32")
    pool.cursor[...] = [1, 2, 1]
    adapters.admit_slots(pool, np.array([0, -1, 3], np.int32))
    assert np.all(pool.cursor[[0, 3]] == 0)
    assert np.all(pool.cursor[[1, 2, 4, 5, 6]] == [1, 2, 1])

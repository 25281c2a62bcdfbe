"""Drop-in entry points with the calling conventions of vLLM's kernels, and
their replay counterparts. docs/integration.md shows how an engine swaps them in.

Baselines (same signature and semantics as the engine's kernel):
  selective_state_update            vLLM Mamba-2 decode
  fused_recurrent_gated_delta_rule  vLLM GDN decode (continuous batching, spec decode)

Replay counterparts (a replay pool instead of the state pool):
  selective_state_update_replay, fused_recurrent_gated_delta_rule_replay,
  admit_slots (after the engine's own prefill wrote the checkpoint).

Differences from the engine kernels, by design:
  * A pad row (index == pad_slot_id) gets a zero output here; vLLM leaves it
    unwritten. Engines never read pad rows, so only non-pad rows are compared.
  * Tied-per-head parameters only: A [H, P, N], dt [B, H, P], dt_bias / D
    [H, P] must be stride-0 expansions of per-head values (what vLLM's
    Mamba-2 layer passes); anything else raises replayssm.Error.
  * GDN: varlen (cu_seqlens) batches must have the same length per sequence
    (the decode / spec-decode case); inplace_final_state=False is not offered.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

from . import _api
from . import _dispatch as _d
from ._C import Error
from .pools import DeltaPool, Mamba2Pool

PAD_SLOT_ID = -1  # vLLM's PAD_SLOT_ID

Array = Any


def _f32(a: Array) -> Array:
    if a is None or _d.dtype_name(a.dtype) == "fp32":
        return a
    return a.float() if _d.is_torch(a) else a.astype("float32")


def _i32(a: Array) -> Array:
    if a is None or str(a.dtype).endswith("int32"):
        return a
    return a.int() if _d.is_torch(a) else a.astype("int32")


def _tied(fn: str, arg: str, a: Array, dims: Tuple[int, ...]) -> None:
    """`a` must have stride 0 in `dims` (where the size exceeds 1)."""
    st = _d.elem_strides(a)
    for i in dims:
        if a.shape[i] > 1 and st[i] != 0:
            raise Error(f"{fn}: argument '{arg}': expected a tied-per-head tensor (stride 0 in "
                        f"dimension {i % a.ndim}), got shape {tuple(a.shape)} strides {st}")


def _rank(fn: str, arg: str, a: Array, ndim: int, what: str) -> None:
    if a.ndim != ndim:
        raise Error(f"{fn}: argument '{arg}': expected {what}, got shape {tuple(a.shape)}")


def _where_slot(cond: Array, slot: Array, pad: int) -> Array:
    if _d.is_torch(slot):
        import torch  # noqa: PLC0415

        return torch.where(cond, slot, torch.full_like(slot, pad))
    mod = __import__(_d.framework(slot))
    return mod.where(cond, slot, mod.asarray(pad, dtype=slot.dtype))


def _pending_rows(cursor: Array, slot: Array, pad: int) -> Array:
    """slot where the row's cursor has pending records, else pad (device-side,
    graph-capturable): rows fresh from prefill ignore num_accepted_tokens."""
    live = slot != pad
    safe = _where_slot(live, slot, 0)
    idx = safe.long() if _d.is_torch(safe) else safe
    return _where_slot(live & (cursor[idx, 2] > 0), slot, pad)


def _mamba2_args(fn, x, dt, A, B, C, D, z, dt_bias, T_axis: bool):
    """vLLM tensors → library tensors [B, T, ...] and per-head [H] parameters."""
    _rank(fn, "A", A, 3, "A [nheads, dim, dstate] (stride-0 over dim, dstate)")
    _tied(fn, "A", A, (1, 2))
    _tied(fn, "dt", dt, (-1,))
    if dt_bias is not None:
        _tied(fn, "dt_bias", dt_bias, (1,))
    if D is not None:
        _tied(fn, "D", D, (1,))
    ex = (lambda a: a) if T_axis else (lambda a: None if a is None else a[:, None])
    return dict(x=ex(x), dt=ex(dt[..., 0]), A=_f32(A[:, 0, 0]), B=ex(B), C=ex(C), z=ex(z),
                dt_bias=None if dt_bias is None else _f32(dt_bias[:, 0]),
                D=None if D is None else _f32(D[:, 0]))


def selective_state_update(state: Array, x: Array, dt: Array, A: Array, B: Array, C: Array,
                           D: Optional[Array] = None, z: Optional[Array] = None,
                           dt_bias: Optional[Array] = None, dt_softplus: bool = False,
                           state_batch_indices: Optional[Array] = None,
                           pad_slot_id: int = PAD_SLOT_ID, out: Optional[Array] = None, *,
                           backend: Optional[str] = None) -> Array:
    """vLLM Mamba-2 ``selective_state_update`` (multi-head form); returns out.

    state [slots, H, P, N] (updated in place at state_batch_indices[b], or at
    row b when absent), x [batch, H, P], dt [batch, H, P] (stride 0 over P),
    A [H, P, N] (stride 0 over P, N), B / C [batch, G, N], D [H, P] and
    dt_bias [H, P] (stride 0 over P), z [batch, H, P], out [batch, H, P].
    dt ← dt + dt_bias, then softplus when dt_softplus;
    state ← exp(dt·A)·state + dt·x·Bᵀ; out = state·C + D·x, times z·sigmoid(z).
    Rows with state_batch_indices[b] == pad_slot_id touch no state (out zero).
    """
    fn = "selective_state_update"
    _rank(fn, "state", state, 4, "state [slots, nheads, dim, dstate]")
    _rank(fn, "x", x, 3, "x [batch, nheads, dim]")
    args = _mamba2_args(fn, x, dt, A, B, C, D, z, dt_bias, T_axis=False)
    out = _d.empty_like(x) if out is None else out
    slot = _d.arange(x, x.shape[0]) if state_batch_indices is None else state_batch_indices
    _api.mamba2_decode(state=state, slot=slot, dt_softplus=dt_softplus, pad_slot_id=pad_slot_id,
                       y=out[:, None], backend=backend, **args)
    return out


def selective_state_update_replay(pool: Mamba2Pool, x: Array, dt: Array, A: Array, B: Array,
                                  C: Array, D: Optional[Array] = None, z: Optional[Array] = None,
                                  dt_bias: Optional[Array] = None, dt_softplus: bool = False,
                                  state_batch_indices: Optional[Array] = None,
                                  pad_slot_id: int = PAD_SLOT_ID, out: Optional[Array] = None,
                                  num_accepted_tokens: Optional[Array] = None, *,
                                  backend: Optional[str] = None) -> Array:
    """Replay counterpart of selective_state_update on a replay Mamba2Pool.

    x [batch, H, P] (one token) or [batch, T, H, P] (1 + drafts tokens; dt,
    B, C, z, out then carry the T axis too). Outputs equal
    selective_state_update's on the accepted token stream.
    num_accepted_tokens None: plain decode, the step's records are committed.
    num_accepted_tokens [batch] int32: speculative decode; it is the accepted
    count of each row's previous step (rows fresh from prefill ignore it),
    committed first; this step's T records stay pending until the next call.
    """
    fn = "selective_state_update_replay"
    T_axis = x.ndim == 4
    if not T_axis:
        _rank(fn, "x", x, 3, "x [batch, nheads, dim] or [batch, T, nheads, dim]")
    args = _mamba2_args(fn, x, dt, A, B, C, D, z, dt_bias, T_axis=T_axis)
    out = _d.empty_like(x) if out is None else out
    slot = _d.arange(x, x.shape[0]) if state_batch_indices is None else state_batch_indices
    if num_accepted_tokens is not None:
        _api.mamba2_commit(pool, _pending_rows(pool.cursor, slot, pad_slot_id),
                           _i32(num_accepted_tokens), pad_slot_id=pad_slot_id, backend=backend)
    _api.mamba2_replay_step(pool=pool, slot=slot, commit_all=num_accepted_tokens is None,
                            dt_softplus=dt_softplus, pad_slot_id=pad_slot_id,
                            y=out if T_axis else out[:, None], backend=backend, **args)
    return out


def _gdn_batch(fn: str, q, k, v, g, beta, cu_seqlens):
    """vLLM [1, total, ...] varlen (uniform lengths) or [N, T, ...] → [N, T, ...]."""
    _rank(fn, "q", q, 4, "q [B, T, H, K]")
    if cu_seqlens is None:
        return q, k, v, g, beta, q.shape[0], q.shape[1]
    if q.shape[0] != 1:
        raise Error(f"{fn}: argument 'q': expected batch 1 with cu_seqlens, got {tuple(q.shape)}")
    n = cu_seqlens.shape[0] - 1
    total = q.shape[1]
    if n <= 0 or total % n:
        raise Error(f"{fn}: argument 'cu_seqlens': expected {n} sequences of equal length, "
                    f"got {total} tokens")
    T = total // n
    if not _d.on_cuda(cu_seqlens):  # host-visible: check the lengths are uniform
        cs = [int(c) for c in cu_seqlens.tolist()]
        if cs != [i * T for i in range(n + 1)]:
            raise Error(f"{fn}: argument 'cu_seqlens': expected equal lengths {T}, got {cs}")
    r = lambda a: None if a is None else a.reshape((n, T) + tuple(a.shape[2:]))  # noqa: E731
    return r(q), r(k), r(v), r(g), r(beta), n, T


def fused_recurrent_gated_delta_rule(q: Array, k: Array, v: Array, g: Array,
                                     beta: Optional[Array] = None, scale: Optional[float] = None,
                                     initial_state: Optional[Array] = None,
                                     inplace_final_state: bool = True,
                                     cu_seqlens: Optional[Array] = None,
                                     ssm_state_indices: Optional[Array] = None,
                                     num_accepted_tokens: Optional[Array] = None,
                                     use_qk_l2norm_in_kernel: bool = False, *,
                                     pad_slot_id: int = PAD_SLOT_ID,
                                     backend: Optional[str] = None) -> Tuple[Array, Array]:
    """vLLM GDN decode ``fused_recurrent_gated_delta_rule``; returns (o, initial_state).

    q / k [B, T, H, K], v [B, T, HV, V], g [B, T, HV] (log-decay), beta
    [B, T, HV] (already sigmoid; None = 1), scale (None = K^-1/2),
    initial_state: the pool [slots, HV, V, K], updated in place. With
    cu_seqlens [N + 1], B = 1 and the N sequences must have equal length T.
    ssm_state_indices [N]: the row's slot (state after all T tokens written
    there); [N, >= T] (spec decode): start from slot [n, a_n - 1], a_n =
    num_accepted_tokens[n] (default 1), write the state after token t to
    slot [n, t]. Absent: row n uses slot n. Per token:
    S ← exp(g)·S; d = β(v − S k); S ← S + d kᵀ; o = S q (q, k L2-normalised
    with ε = 1e-6 inside the root when use_qk_l2norm_in_kernel, q scaled).
    Pad rows (slot index == pad_slot_id) get o = 0 and touch no state.
    """
    fn = "fused_recurrent_gated_delta_rule"
    if initial_state is None or not inplace_final_state:
        raise Error(f"{fn}: argument 'initial_state': expected the state pool [slots, HV, V, K] "
                    "updated in place (inplace_final_state=True)")
    o_full = _d.empty_like(v)
    q3, k3, v3, g3, b3, n, T = _gdn_batch(fn, q, k, v, g, beta, cu_seqlens)
    o = o_full.reshape(v3.shape)
    if b3 is None:
        b3 = _d.empty(g3, g3.shape[:3], "float32")
        b3[...] = 1
    kw = dict(A_log=None, raw_gate=False, raw_beta=False, l2norm_qk=use_qk_l2norm_in_kernel,
              q_scale=0.0 if scale is None else float(scale), pad_slot_id=pad_slot_id, o=o,
              backend=backend)
    if ssm_state_indices is not None and ssm_state_indices.ndim == 2:
        _api.delta_snapshot_decode("gdn", q3, k3, v3, g3, b3, initial_state,
                                   ssm_state_indices[:, :T], _i32(num_accepted_tokens), **kw)
    else:
        slot = _d.arange(q3, n) if ssm_state_indices is None else ssm_state_indices
        _api.delta_decode("gdn", q3, k3, v3, g3, b3, initial_state, slot, **kw)
    return o_full, initial_state


def fused_recurrent_gated_delta_rule_replay(q: Array, k: Array, v: Array, g: Array,
                                            beta: Optional[Array], scale: Optional[float],
                                            pool: DeltaPool, ssm_state_indices: Array,
                                            num_accepted_tokens: Optional[Array] = None,
                                            use_qk_l2norm_in_kernel: bool = False,
                                            cu_seqlens: Optional[Array] = None, *,
                                            pad_slot_id: int = PAD_SLOT_ID,
                                            backend: Optional[str] = None) -> Array:
    """Replay counterpart of fused_recurrent_gated_delta_rule; returns o.

    One slot per row: ssm_state_indices [N] (a 2-D [N, T] snapshot table may
    be passed; its column 0 is used). num_accepted_tokens as in
    selective_state_update_replay: None = plain decode (records committed),
    else the previous step's accepted counts (fresh rows ignore them) and
    this step's records stay pending. Outputs equal the baseline's on the
    accepted token stream.
    """
    fn = "fused_recurrent_gated_delta_rule_replay"
    o_full = _d.empty_like(v)
    q3, k3, v3, g3, b3, n, T = _gdn_batch(fn, q, k, v, g, beta, cu_seqlens)
    if b3 is None:
        b3 = _d.empty(g3, g3.shape[:3], "float32")
        b3[...] = 1
    slot = ssm_state_indices[:, 0] if ssm_state_indices.ndim == 2 else ssm_state_indices
    if num_accepted_tokens is not None:
        _api.delta_commit(pool, _pending_rows(pool.cursor, slot, pad_slot_id),
                          _i32(num_accepted_tokens), pad_slot_id=pad_slot_id, backend=backend)
    _api.delta_replay_step(pool.family, q3, k3, v3, g3, b3, pool, slot,
                           commit_all=num_accepted_tokens is None, A_log=None, raw_gate=False,
                           raw_beta=False, l2norm_qk=use_qk_l2norm_in_kernel,
                           q_scale=0.0 if scale is None else float(scale),
                           pad_slot_id=pad_slot_id, o=o_full.reshape(v3.shape), backend=backend)
    return o_full


def admit_slots(pool: Any, slots: Array, pad_slot_id: int = PAD_SLOT_ID) -> None:
    """Mark `slots` as fresh after the engine's own prefill wrote their
    checkpoint into pool.state: empty ring, nothing pending (cursor ← 0).
    Device-side and graph-capturable; pad entries are skipped."""
    live = slots != pad_slot_id
    safe = _where_slot(live, slots, 0)
    S = pool.cursor.shape[0]
    if _d.is_torch(slots):
        import torch  # noqa: PLC0415

        hits = torch.zeros(S, dtype=torch.int32, device=slots.device)
        hits.index_put_((safe.long(),), live.int(), accumulate=True)
    else:
        mod = __import__(_d.framework(slots))
        hits = mod.zeros(S, dtype="int32")
        mod.add.at(hits, safe, live.astype("int32"))
    pool.cursor[...] = pool.cursor * (hits == 0)[:, None]

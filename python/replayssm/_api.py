"""The library's operations on any DLPack arrays (numpy, torch, cupy).

Shapes use the letters of design/replay.md: B rows, T tokens per row, H heads,
P head dim, N d_state, G groups, HV value heads, K key dim, V value dim,
S slots, R ring entries, W conv width, `tokens` packed prompt tokens.

Common keyword arguments:
  backend        'reference' | 'cpu' | 'cuda' | None (cuda when the data is on a GPU)
  stream         CUDA stream handle (int) or None (the producer's current stream;
                 must be None for torch tensors, which use torch's current stream)
  num_threads    cpu backend threads (0 = all)
  device_status  optional int32 [1] on the device: errors only the GPU sees are
                 OR-ed in (see check_device_status) and the offending row skipped
  pad_slot_id    rows whose slot equals it touch no state; their outputs are zero
  workspace      optional contiguous host array (any dtype) used as the call's
                 scratch on the cpu backend, at least *_workspace_bytes(...)
                 bytes, 64-byte aligned; None: the library's per-thread buffer.
                 The reference and cuda backends ignore it

Outputs (y / o / out) are allocated when not given and returned. Every call
validates before writing and raises replayssm.Error (a ValueError) naming the
function, the argument, what was expected and what it got.
"""
from __future__ import annotations

from typing import Any, Optional

from . import _dispatch as _d
from .pools import Conv1dPool, DeltaPool, Mamba2Pool

Array = Any


def _exec(kw: dict, backend, stream, num_threads, device_status, workspace=None) -> dict:
    kw.update(backend=backend, stream=stream, num_threads=num_threads,
              device_status=device_status, workspace=workspace)
    return kw


def _m2_pool(pool: Any) -> dict:
    return pool.fields() if isinstance(pool, Mamba2Pool) else {"state": pool}


def _delta_pool(pool: Any) -> dict:
    return pool.fields() if isinstance(pool, DeltaPool) else {"state": pool}


# ---- Mamba-2 -----------------------------------------------------------------


def mamba2_decode(x: Array, dt: Array, A: Array, B: Array, C: Array, state: Array, slot: Array,
                  *, z: Optional[Array] = None, dt_bias: Optional[Array] = None,
                  D: Optional[Array] = None, dt_softplus: bool = True, pad_slot_id: int = -1,
                  y: Optional[Array] = None, backend: Optional[str] = None, stream=None,
                  num_threads: int = 0, device_status=None, workspace=None) -> Array:
    """Standard decode (baseline): state[slot[b]] ← T tokens; returns y.

    x [B, T, H, P] (activation dtype fp32 | fp16 | bf16), dt [B, T, H] (fp32 or
    activation dtype), A [H] fp32, B / C [B, T, G, N], z [B, T, H, P],
    dt_bias / D [H] fp32, state [S, H, P, N] (or a baseline Mamba2Pool),
    slot [B] int32 | int64, y [B, T, H, P].
    """
    y = _d.empty_like(x) if y is None else y
    st = state.state if isinstance(state, Mamba2Pool) else state
    kw = dict(x=x, dt=dt, B=B, C=C, A=A, y=y, slot=slot, z=z, dt_bias=dt_bias, D=D,
              dt_softplus=dt_softplus, pad_slot_id=pad_slot_id, state=st)
    _d.call("mamba2_decode", _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return y


def mamba2_snapshot_decode(x: Array, dt: Array, A: Array, B: Array, C: Array, state: Array,
                           state_indices: Array, num_accepted: Optional[Array] = None, *,
                           z=None, dt_bias=None, D=None, dt_softplus: bool = True,
                           pad_slot_id: int = -1, y=None, backend=None, stream=None,
                           num_threads: int = 0, device_status=None, workspace=None) -> Array:
    """Snapshot speculative baseline; returns y [B, T, H, P].

    state_indices [B, T]: row b starts from slot state_indices[b, a_b - 1]
    (a_b = num_accepted[b], int32 [B], default 1) and writes the state after
    token t to slot state_indices[b, t]. A row with state_indices[b, 0] ==
    pad_slot_id is a pad row. Other shapes as mamba2_decode.
    """
    y = _d.empty_like(x) if y is None else y
    st = state.state if isinstance(state, Mamba2Pool) else state
    kw = dict(x=x, dt=dt, B=B, C=C, A=A, y=y, slot=state_indices[:, 0], z=z, dt_bias=dt_bias,
              D=D, dt_softplus=dt_softplus, pad_slot_id=pad_slot_id, state=st,
              state_indices=state_indices, num_accepted=num_accepted)
    _d.call("mamba2_snapshot_decode",
            _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return y


def mamba2_prefill(x: Array, dt: Array, A: Array, B: Array, C: Array, pool: Any,
                   cu_seqlens: Array, slot: Array, *, initial: Optional[Array] = None, z=None,
                   dt_bias=None, D=None, dt_softplus: bool = True, pad_slot_id: int = -1,
                   y=None, backend=None, stream=None, num_threads: int = 0,
                   device_status=None, workspace=None) -> Array:
    """Prefill packed prompts; returns y [tokens, H, P].

    x [tokens, H, P], dt [tokens, H], B / C [tokens, G, N], cu_seqlens [B + 1]
    (int32 | int64, host-readable), slot [B], initial [B] int32 0/1 (1: start
    from the row's current state, else zero). pool: Mamba2Pool (replay or
    baseline) or a state array [S, H, P, N]. Leaves an empty ring.
    """
    y = _d.empty_like(x) if y is None else y
    kw = dict(x=x, dt=dt, B=B, C=C, A=A, y=y, cu_seqlens=cu_seqlens, slot=slot, z=z,
              dt_bias=dt_bias, D=D, dt_softplus=dt_softplus, pad_slot_id=pad_slot_id,
              initial=initial, **_m2_pool(pool))
    _d.call("mamba2_prefill", _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return y


def mamba2_replay_step(x: Array, dt: Array, A: Array, B: Array, C: Array, pool: Mamba2Pool,
                       slot: Array, num_accepted: Optional[Array] = None, *,
                       commit_all: bool = False, z=None, dt_bias=None, D=None,
                       dt_softplus: bool = True, pad_slot_id: int = -1, y=None, backend=None,
                       stream=None, num_threads: int = 0, device_status=None,
                       workspace=None) -> Array:
    """Replay step of T tokens per row against checkpoint + ring; returns y.

    num_accepted [B] int32 commits the previous step's pending records first
    (1 <= a <= pending). Flushes when count + T > L, appends T records and
    leaves them pending, or commits them all with commit_all (plain decode).
    Shapes as mamba2_decode; pool is a replay Mamba2Pool.
    """
    y = _d.empty_like(x) if y is None else y
    kw = dict(x=x, dt=dt, B=B, C=C, A=A, y=y, slot=slot, z=z, dt_bias=dt_bias, D=D,
              dt_softplus=dt_softplus, pad_slot_id=pad_slot_id, num_accepted=num_accepted,
              commit_all=commit_all, **_m2_pool(pool))
    _d.call("mamba2_replay_step",
            _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return y


def mamba2_commit(pool: Mamba2Pool, slot: Array, num_accepted: Array, *, pad_slot_id: int = -1,
                  backend=None, stream=None, num_threads: int = 0, device_status=None,
                  workspace=None) -> None:
    """Commit accepted counts num_accepted [n] int32 of the rows slot [n]."""
    kw = dict(slot=slot, num_accepted=num_accepted, pad_slot_id=pad_slot_id, **_m2_pool(pool))
    _d.call("mamba2_commit",
            _exec(kw, backend, stream, num_threads, device_status, workspace), pool.state)


def mamba2_materialize(pool: Mamba2Pool, slot: Array, out: Optional[Array] = None, *,
                       A: Optional[Array] = None, pad_slot_id: int = -1, backend=None,
                       stream=None, num_threads: int = 0, device_status=None,
                       workspace=None) -> Array:
    """out [n, H, P, N] (any float dtype; default fp32) = checkpoint ⊕ committed
    records of slot [n]. A [H] fp32 defaults to pool.A (required on a replay pool)."""
    if out is None:
        s = pool.state.shape
        out = _d.empty(pool.state, (slot.shape[0], s[1], s[2], s[3]), "float32")
    kw = dict(A=pool.A if A is None else A, slot=slot, out=out, pad_slot_id=pad_slot_id,
              **_m2_pool(pool))
    _d.call("mamba2_materialize", _exec(kw, backend, stream, num_threads, device_status, workspace),
            pool.state)
    return out


def mamba2_flush(pool: Mamba2Pool, slot: Array, *, A: Optional[Array] = None,
                 pad_slot_id: int = -1, backend=None, stream=None, num_threads: int = 0,
                 device_status=None, workspace=None) -> None:
    """Fold the committed records of slot [n] into the checkpoint (no pending allowed)."""
    kw = dict(A=pool.A if A is None else A, slot=slot, pad_slot_id=pad_slot_id, **_m2_pool(pool))
    _d.call("mamba2_flush",
            _exec(kw, backend, stream, num_threads, device_status, workspace), pool.state)


def mamba2_copy_slot(pool: Mamba2Pool, src: Array, dst: Array, *, pad_slot_id: int = -1,
                     backend=None, stream=None, num_threads: int = 0, device_status=None,
                     workspace=None) -> None:
    """Copy state, ring and cursor rows src [n] → dst [n] (forking)."""
    kw = dict(src=src, dst=dst, pad_slot_id=pad_slot_id, **_m2_pool(pool))
    _d.call("mamba2_copy_slot",
            _exec(kw, backend, stream, num_threads, device_status, workspace), pool.state)


def mamba2_reset_slot(pool: Mamba2Pool, slot: Array, *, pad_slot_id: int = -1, backend=None,
                      stream=None, num_threads: int = 0, device_status=None,
                      workspace=None) -> None:
    """Zero checkpoint, ring and cursor of slot [n] (new request, preemption)."""
    kw = dict(slot=slot, pad_slot_id=pad_slot_id, **_m2_pool(pool))
    _d.call("mamba2_reset_slot", _exec(kw, backend, stream, num_threads, device_status, workspace),
            pool.state)


def mamba2_decode_shared(x: Array, dt: Array, A: Array, B: Array, C: Array,
                         packed_state: Array, slot: Array, *, format: str,
                         stochastic: bool = False, seed: int = 0, step: int = 0, z=None,
                         dt_bias=None, D=None, dt_softplus: bool = True, pad_slot_id: int = -1,
                         y=None, backend=None, stream=None, num_threads: int = 0,
                         device_status=None, workspace=None) -> Array:
    """Shared-precision decode: standard decode on a packed state; returns y.

    packed_state uint8 [S, H, mamba2_tile_bytes(format)] (see
    mamba2_shared_state), format 'bf16' | 'fp16' | 'fp8' | 'nvfp4'. Each row's
    tiles are decoded, the T tokens applied (reference fp64, cpu fp32) and the
    state re-encoded: round to nearest even, or with stochastic=True
    stochastic rounding from a hash of (seed, slot·H + head, step, element).
    No torch custom op (tensors go through DLPack directly, eager only).
    Other shapes as mamba2_decode.
    """
    y = _d.empty_like(x) if y is None else y
    kw = dict(x=x, dt=dt, B=B, C=C, A=A, y=y, slot=slot, z=z, dt_bias=dt_bias, D=D,
              dt_softplus=dt_softplus, pad_slot_id=pad_slot_id, packed_state=packed_state,
              format=format, stochastic=bool(stochastic), seed=int(seed), step=int(step))
    _d.call("mamba2_decode_shared",
            _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return y


# ---- GDN / KDA ---------------------------------------------------------------


def _gating(kw: dict, A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, q_scale, pad_slot_id):
    kw.update(A_log=A_log, dt_bias=dt_bias, raw_gate=raw_gate, raw_beta=raw_beta,
              l2norm_qk=l2norm_qk, q_scale=float(q_scale), pad_slot_id=pad_slot_id)
    return kw


def _o(o, q, v):
    return _d.empty_like(v) if o is None else o


def delta_decode(family: str, q: Array, k: Array, v: Array, g: Array, beta: Array, state: Array,
                 slot: Array, *, A_log=None, dt_bias=None, raw_gate: bool = True,
                 raw_beta: bool = True, l2norm_qk: bool = True, q_scale: float = 0.0,
                 pad_slot_id: int = -1, o=None, backend=None, stream=None, num_threads: int = 0,
                 device_status=None, workspace=None) -> Array:
    """Standard GDN / KDA decode (family 'gdn' | 'kda'); returns o [B, T, HV, V].

    q / k [B, T, H, K], v [B, T, HV, V] (activation dtype), g GDN [B, T, HV] /
    KDA [B, T, HV, K] and beta [B, T, HV] (fp32 or activation dtype), A_log [HV]
    fp32 (raw_gate), dt_bias GDN [HV] / KDA [HV, K] fp32, state [S, HV, V, K],
    slot [B]. raw_gate: g = −exp(A_log)·softplus(g + dt_bias), else g is the
    log-decay; raw_beta: β = sigmoid(beta); l2norm_qk: L2-normalise q, k;
    q_scale: 0 = K^-1/2.
    """
    o = _o(o, q, v)
    st = state.state if isinstance(state, DeltaPool) else state
    kw = _gating(dict(family=family, q=q, k=k, v=v, g=g, beta=beta, o=o, slot=slot, state=st),
                 A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, q_scale, pad_slot_id)
    _d.call("delta_decode", _exec(kw, backend, stream, num_threads, device_status, workspace), q)
    return o


def delta_snapshot_decode(family: str, q, k, v, g, beta, state, state_indices,
                          num_accepted=None, *, A_log=None, dt_bias=None, raw_gate=True,
                          raw_beta=True, l2norm_qk=True, q_scale=0.0, pad_slot_id=-1, o=None,
                          backend=None, stream=None, num_threads=0, device_status=None,
                          workspace=None) -> Array:
    """Snapshot speculative baseline (see mamba2_snapshot_decode); shapes as
    delta_decode, state_indices [B, T], num_accepted [B] int32."""
    o = _o(o, q, v)
    st = state.state if isinstance(state, DeltaPool) else state
    kw = _gating(dict(family=family, q=q, k=k, v=v, g=g, beta=beta, o=o, state=st,
                      state_indices=state_indices, num_accepted=num_accepted),
                 A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, q_scale, pad_slot_id)
    _d.call("delta_snapshot_decode",
            _exec(kw, backend, stream, num_threads, device_status, workspace), q)
    return o


def delta_prefill(family: str, q, k, v, g, beta, pool: Any, cu_seqlens, slot, *, initial=None,
                  A_log=None, dt_bias=None, raw_gate=True, raw_beta=True, l2norm_qk=True,
                  q_scale=0.0, pad_slot_id=-1, o=None, backend=None, stream=None,
                  num_threads=0, device_status=None, workspace=None) -> Array:
    """Prefill packed prompts: q / k [tokens, H, K], v [tokens, HV, V], g GDN
    [tokens, HV] / KDA [tokens, HV, K], beta [tokens, HV], cu_seqlens [B + 1],
    slot [B], initial [B] int32 0/1; returns o [tokens, HV, V]."""
    o = _o(o, q, v)
    kw = _gating(dict(family=family, q=q, k=k, v=v, g=g, beta=beta, o=o, cu_seqlens=cu_seqlens,
                      slot=slot, initial=initial, **_delta_pool(pool)),
                 A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, q_scale, pad_slot_id)
    _d.call("delta_prefill", _exec(kw, backend, stream, num_threads, device_status, workspace), q)
    return o


def delta_replay_step(family: str, q, k, v, g, beta, pool: DeltaPool, slot,
                      num_accepted=None, *, commit_all=False, A_log=None, dt_bias=None,
                      raw_gate=True, raw_beta=True, l2norm_qk=True, q_scale=0.0,
                      pad_slot_id=-1, o=None, backend=None, stream=None, num_threads=0,
                      device_status=None, workspace=None) -> Array:
    """Replay step (see mamba2_replay_step); shapes as delta_decode."""
    o = _o(o, q, v)
    kw = _gating(dict(family=family, q=q, k=k, v=v, g=g, beta=beta, o=o, slot=slot,
                      num_accepted=num_accepted, commit_all=commit_all, **_delta_pool(pool)),
                 A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, q_scale, pad_slot_id)
    _d.call("delta_replay_step",
            _exec(kw, backend, stream, num_threads, device_status, workspace), q)
    return o


def delta_commit(pool: DeltaPool, slot, num_accepted, *, pad_slot_id=-1, backend=None,
                 stream=None, num_threads=0, device_status=None, workspace=None) -> None:
    """Commit accepted counts num_accepted [n] int32 of the rows slot [n]."""
    kw = dict(family=pool.family, slot=slot, num_accepted=num_accepted, pad_slot_id=pad_slot_id,
              **_delta_pool(pool))
    _d.call("delta_commit",
            _exec(kw, backend, stream, num_threads, device_status, workspace), pool.state)


def delta_materialize(pool: DeltaPool, slot, out=None, *, pad_slot_id=-1, backend=None,
                      stream=None, num_threads=0, device_status=None, workspace=None) -> Array:
    """out [n, HV, V, K] (any float dtype; default fp32) = checkpoint ⊕ committed records."""
    if out is None:
        s = pool.state.shape
        out = _d.empty(pool.state, (slot.shape[0], s[1], s[2], s[3]), "float32")
    kw = dict(family=pool.family, slot=slot, out=out, pad_slot_id=pad_slot_id,
              **_delta_pool(pool))
    _d.call("delta_materialize", _exec(kw, backend, stream, num_threads, device_status, workspace),
            pool.state)
    return out


def delta_flush(pool: DeltaPool, slot, *, pad_slot_id=-1, backend=None, stream=None,
                num_threads=0, device_status=None, workspace=None) -> None:
    """Fold the committed records of slot [n] into the checkpoint."""
    kw = dict(family=pool.family, slot=slot, pad_slot_id=pad_slot_id, **_delta_pool(pool))
    _d.call("delta_flush",
            _exec(kw, backend, stream, num_threads, device_status, workspace), pool.state)


def delta_copy_slot(pool: DeltaPool, src, dst, *, pad_slot_id=-1, backend=None, stream=None,
                    num_threads=0, device_status=None, workspace=None) -> None:
    """Copy state, ring and cursor rows src [n] → dst [n]."""
    kw = dict(family=pool.family, src=src, dst=dst, pad_slot_id=pad_slot_id, **_delta_pool(pool))
    _d.call("delta_copy_slot",
            _exec(kw, backend, stream, num_threads, device_status, workspace), pool.state)


def delta_reset_slot(pool: DeltaPool, slot, *, pad_slot_id=-1, backend=None, stream=None,
                     num_threads=0, device_status=None, workspace=None) -> None:
    """Zero checkpoint, ring and cursor of slot [n]."""
    kw = dict(family=pool.family, slot=slot, pad_slot_id=pad_slot_id, **_delta_pool(pool))
    _d.call("delta_reset_slot", _exec(kw, backend, stream, num_threads, device_status, workspace),
            pool.state)


def delta_decode_shared(family: str, q, k, v, g, beta, packed_state, slot, *, format: str,
                        stochastic: bool = False, seed: int = 0, step: int = 0, A_log=None,
                        dt_bias=None, raw_gate=True, raw_beta=True, l2norm_qk=True,
                        q_scale=0.0, pad_slot_id=-1, o=None, backend=None, stream=None,
                        num_threads=0, device_status=None, workspace=None) -> Array:
    """Shared-precision GDN / KDA decode on packed_state uint8
    [S, HV, delta_tile_bytes(format)] (tiles [V, K]); see mamba2_decode_shared
    (tile id slot·HV + head). Shapes as delta_decode; returns o."""
    o = _o(o, q, v)
    kw = _gating(dict(family=family, q=q, k=k, v=v, g=g, beta=beta, o=o, slot=slot,
                      packed_state=packed_state, format=format, stochastic=bool(stochastic),
                      seed=int(seed), step=int(step)),
                 A_log, dt_bias, raw_gate, raw_beta, l2norm_qk, q_scale, pad_slot_id)
    _d.call("delta_decode_shared",
            _exec(kw, backend, stream, num_threads, device_status, workspace), q)
    return o


# ---- conv1d --------------------------------------------------------------------


def conv1d_update(x: Array, weight: Array, pool: Conv1dPool, slot: Array,
                  num_accepted: Optional[Array] = None, *, bias=None, silu: bool = True,
                  pad_slot_id: int = -1, out=None, backend=None, stream=None, num_threads=0,
                  device_status=None, workspace=None) -> Array:
    """Causal conv1d update with rollback; returns out [B, T, dim].

    x [B, T, dim], weight [dim, W], bias [dim], slot [B], num_accepted [B]
    int32 (accepted count of each row's previous step, in [1, pending]; absent
    = all of it). As for the SSM pools, a row with nothing pending (fresh from
    prefill or reset) must not be given a count: for a batch that mixes fresh
    and pending rows, conv1d_commit the pending rows first (fresh rows as
    pad_slot_id there), then update every row without num_accepted.
    """
    out = _d.empty_like(x) if out is None else out
    kw = dict(x=x, weight=weight, out=out, slot=slot, conv_state=pool.state,
              conv_pending=pool.pending, bias=bias, silu=silu, pad_slot_id=pad_slot_id,
              num_accepted=num_accepted)
    _d.call("conv1d_update", _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return out


def conv1d_commit(pool: Conv1dPool, slot: Array, num_accepted: Array, *, W: int,
                  pad_slot_id: int = -1, backend=None, stream=None, num_threads=0,
                  device_status=None, workspace=None) -> None:
    """Commit accepted counts num_accepted [B] int32 (in [1, pending]) of the
    rows slot [B]: state rows [0, W - 1) <- rows [a, a + W - 1), pending <- 0.
    W is the kernel width (weight [dim, W]). Afterwards the rows are fresh: one
    conv1d_update without num_accepted continues them exactly. Needs no
    workspace (conv1d_workspace_bytes(op="commit") is 0)."""
    kw = dict(conv_state=pool.state, conv_pending=pool.pending, slot=slot,
              num_accepted=num_accepted, W=W, pad_slot_id=pad_slot_id)
    _d.call("conv1d_commit", _exec(kw, backend, stream, num_threads, device_status, workspace),
            pool.state)


def conv1d_prefill(x: Array, weight: Array, pool: Conv1dPool, cu_seqlens: Array, slot: Array, *,
                   initial=None, bias=None, silu: bool = True, pad_slot_id: int = -1, out=None,
                   backend=None, stream=None, num_threads=0, device_status=None,
                   workspace=None) -> Array:
    """Conv1d over packed prompts x [tokens, dim]; returns out [tokens, dim]."""
    out = _d.empty_like(x) if out is None else out
    kw = dict(x=x, weight=weight, out=out, cu_seqlens=cu_seqlens, slot=slot,
              conv_state=pool.state, conv_pending=pool.pending, bias=bias, silu=silu,
              pad_slot_id=pad_slot_id, initial=initial)
    _d.call("conv1d_prefill", _exec(kw, backend, stream, num_threads, device_status, workspace), x)
    return out

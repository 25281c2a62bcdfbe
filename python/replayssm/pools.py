"""State pools: containers of the per-slot tensors each operation reads and
writes, and helpers that allocate them with the right shapes and dtypes.

Every tensor's leading dimension is the slot (S slots). Views into a larger
allocation are accepted (any strides with a unit inner stride), so an engine
may keep one layer-major buffer per field and hand each layer its view; the
allocators below do exactly that with ``layers=n``.

Dimension letters (design/replay.md): H heads, P Mamba-2 head dim, N d_state,
G groups, HV value heads, K key dim, V value dim, L history capacity,
T_max tokens per row per step, R = L + T_max ring entries, W conv width.

Arrays are numpy (``lib="numpy"``, CPU; fp32 / fp16 only since numpy has no
bf16), torch (``lib="torch"``, any device) or cupy (``lib="cupy"``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from . import _C

_NP = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "i32": "int32"}


def _norm(dtype: Any) -> str:
    from ._dispatch import dtype_name  # noqa: PLC0415

    return dtype_name(dtype)


def _zeros(lib: str, shape, dtype: str, device: Any) -> Any:
    name = _NP[dtype]
    if lib == "torch":
        import torch  # noqa: PLC0415

        return torch.zeros(tuple(shape), dtype=getattr(torch, name), device=device)
    if lib == "cupy":
        import cupy  # noqa: PLC0415

        return cupy.zeros(tuple(shape), dtype=name)
    if lib != "numpy":
        raise _C.Error(f"replayssm.pools: argument 'lib': expected numpy | torch | cupy, got '{lib}'")
    import numpy  # noqa: PLC0415

    if name == "bfloat16":
        raise _C.Error("replayssm.pools: argument 'dtype': expected fp32 | fp16 for numpy "
                       "(numpy has no bf16), got bf16; allocate with lib='torch'")
    return numpy.zeros(tuple(shape), dtype=name)


def _alloc(lib: str, layers: Optional[int], shape, dtype: str, device: Any) -> List[Any]:
    """One buffer [layers, *shape] and its per-layer views (or one [*shape])."""
    if layers is None:
        return [_zeros(lib, shape, dtype, device)]
    buf = _zeros(lib, (layers, *shape), dtype, device)
    return [buf[i] for i in range(layers)]


@dataclass
class Mamba2Pool:
    """Mamba-2 pool. A baseline pool has only ``state``.

    state   [S, H, P, N]  checkpoint (replay) or the state (baseline); fp32 | fp16 | bf16
    ring_x  [S, R, H, P]  records of x, dtype of x
    ring_dt [S, R, H]     δ records, fp32
    ring_B  [S, R, G, N]  records of B, dtype of B
    cursor  [S, 3]        int32 {start, count, pending}
    L                     history capacity (R >= L + T for every step)
    A       [H]           fp32 A of the layer: needed by flush / materialize
    """

    state: Any
    ring_x: Any = None
    ring_dt: Any = None
    ring_B: Any = None
    cursor: Any = None
    L: int = 16
    A: Any = None

    @property
    def is_replay(self) -> bool:
        return self.cursor is not None

    def fields(self) -> Dict[str, Any]:
        return {"state": self.state, "ring_x": self.ring_x, "ring_dt": self.ring_dt,
                "ring_B": self.ring_B, "cursor": self.cursor, "L": self.L}


@dataclass
class DeltaPool:
    """GDN / KDA pool. A baseline pool has only ``state``.

    state   [S, HV, V, K]            checkpoint, fp32 | fp16 | bf16
    ring_d  [S, R, HV, V]            d records, fp32 (bf16 / fp16 as an explicit option)
    ring_k  [S, R, H, K]             k records, dtype of k
    ring_ks [S, R, H]                fp32 scale of each k record (1/‖k‖ with L2 norm, else 1)
    ring_g  GDN [S, R, HV], KDA [S, R, HV, K]  log-decay records, fp32
    cursor  [S, 3]                   int32 {start, count, pending}
    family  'gdn' | 'kda'
    """

    state: Any
    ring_d: Any = None
    ring_k: Any = None
    ring_ks: Any = None
    ring_g: Any = None
    cursor: Any = None
    L: int = 16
    family: str = "gdn"

    @property
    def is_replay(self) -> bool:
        return self.cursor is not None

    def fields(self) -> Dict[str, Any]:
        return {"state": self.state, "ring_d": self.ring_d, "ring_k": self.ring_k,
                "ring_ks": self.ring_ks, "ring_g": self.ring_g, "cursor": self.cursor,
                "L": self.L}


@dataclass
class Conv1dPool:
    """Causal conv1d state.

    state   [S, W - 1 + T_max, dim]  committed history then the last step's inputs
    pending [S] int32                tokens of the last step (0 after prefill / reset)
    """

    state: Any
    pending: Any


def mamba2_pool(slots: int, H: int, P: int, N: int, G: int, *, L: int = 16, T_max: int = 1,
                state_dtype: Any = "fp32", act_dtype: Any = "bf16", replay: bool = True,
                A: Any = None, lib: str = "numpy", device: Any = None,
                layers: Optional[int] = None) -> Union[Mamba2Pool, List[Mamba2Pool]]:
    """Zeroed Mamba-2 pool for `slots` slots (all slots empty).

    replay=False gives a baseline pool (state only). With `layers`, returns a
    list of per-layer pools viewing layer-major buffers [layers, slots, ...].
    """
    sd, ad = _norm(state_dtype), _norm(act_dtype)
    R = _C.mamba2_ring_length(L=L, T_max=T_max)
    st = _alloc(lib, layers, (slots, H, P, N), sd, device)
    n = len(st)
    if not replay:
        return _one([Mamba2Pool(state=st[i], L=L, A=A) for i in range(n)], layers)
    rx = _alloc(lib, layers, (slots, R, H, P), ad, device)
    rdt = _alloc(lib, layers, (slots, R, H), "fp32", device)
    rb = _alloc(lib, layers, (slots, R, G, N), ad, device)
    cur = _alloc(lib, layers, (slots, 3), "i32", device)
    return _one([Mamba2Pool(st[i], rx[i], rdt[i], rb[i], cur[i], L, A) for i in range(n)], layers)


def delta_pool(family: str, slots: int, H: int, HV: int, K: int, V: int, *, L: int = 16,
               T_max: int = 1, state_dtype: Any = "fp32", act_dtype: Any = "bf16",
               d_dtype: Any = "fp32", replay: bool = True, lib: str = "numpy",
               device: Any = None,
               layers: Optional[int] = None) -> Union[DeltaPool, List[DeltaPool]]:
    """Zeroed GDN / KDA pool (family 'gdn' | 'kda'); see mamba2_pool."""
    if family not in ("gdn", "kda"):
        raise _C.Error(f"delta_pool: argument 'family': expected gdn | kda, got '{family}'")
    sd, ad, dd = _norm(state_dtype), _norm(act_dtype), _norm(d_dtype)
    R = _C.delta_ring_length(L=L, T_max=T_max)
    st = _alloc(lib, layers, (slots, HV, V, K), sd, device)
    n = len(st)
    if not replay:
        return _one([DeltaPool(state=st[i], L=L, family=family) for i in range(n)], layers)
    rd = _alloc(lib, layers, (slots, R, HV, V), dd, device)
    rk = _alloc(lib, layers, (slots, R, H, K), ad, device)
    rks = _alloc(lib, layers, (slots, R, H), "fp32", device)
    g_shape = (slots, R, HV) if family == "gdn" else (slots, R, HV, K)
    rg = _alloc(lib, layers, g_shape, "fp32", device)
    cur = _alloc(lib, layers, (slots, 3), "i32", device)
    return _one([DeltaPool(st[i], rd[i], rk[i], rks[i], rg[i], cur[i], L, family)
                 for i in range(n)], layers)


def conv1d_pool(slots: int, dim: int, W: int, *, T_max: int = 1, dtype: Any = "bf16",
                lib: str = "numpy", device: Any = None,
                layers: Optional[int] = None) -> Union[Conv1dPool, List[Conv1dPool]]:
    """Zeroed conv1d state [slots, W - 1 + T_max, dim] and pending counts."""
    rows = _C.conv1d_state_rows(W=W, T_max=T_max)
    st = _alloc(lib, layers, (slots, rows, dim), _norm(dtype), device)
    pe = _alloc(lib, layers, (slots,), "i32", device)
    return _one([Conv1dPool(st[i], pe[i]) for i in range(len(st))], layers)


def _one(pools: list, layers: Optional[int]):
    return pools if layers is not None else pools[0]


def mamba2_bytes_per_row(H: int, P: int, N: int, G: int, *, mode: str = "replay",
                         state_dtype: Any = "fp32", act_dtype: Any = "bf16", L: int = 16,
                         T_max: int = 1) -> int:
    """Bytes one slot of one layer occupies. mode: 'replay' (checkpoint, ring,
    cursor), 'snapshot' (1 + drafts = T_max full states) or 'baseline' (one state)."""
    sd = _norm(state_dtype)
    if mode == "replay":
        return _C.mamba2_replay_bytes_per_row(H=H, P=P, N=N, G=G, state_dtype=sd,
                                              act_dtype=_norm(act_dtype), L=L, T_max=T_max)
    return _C.mamba2_snapshot_bytes_per_row(H=H, P=P, N=N, G=G, state_dtype=sd,
                                            T_max=T_max if mode == "snapshot" else 1)


def delta_bytes_per_row(family: str, H: int, HV: int, K: int, V: int, *, mode: str = "replay",
                        state_dtype: Any = "fp32", act_dtype: Any = "bf16",
                        d_dtype: Any = "fp32", L: int = 16, T_max: int = 1) -> int:
    """Bytes one slot of one layer occupies; see mamba2_bytes_per_row."""
    sd = _norm(state_dtype)
    if mode == "replay":
        return _C.delta_replay_bytes_per_row(family=family, H=H, HV=HV, K=K, V=V, state_dtype=sd,
                                             act_dtype=_norm(act_dtype), d_dtype=_norm(d_dtype),
                                             L=L, T_max=T_max)
    return _C.delta_snapshot_bytes_per_row(H=H, HV=HV, K=K, V=V, state_dtype=sd,
                                           T_max=T_max if mode == "snapshot" else 1)

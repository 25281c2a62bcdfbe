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
bf16), torch (``lib="torch"``, any device) or cupy (``lib="cupy"``; device:
a device id or cupy Device, else cupy's current device).

Dual precision (docs/dual_precision.md): ``read_format="bf16" | "fp16" |
"fp8" | "nvfp4"`` adds a packed read copy of the checkpoint (uint8
[S, heads, tile_bytes], one tile per (slot, head)) and, for GDN / KDA, the
records ``ring_v`` / ``ring_beta`` a flush needs. Shared mode keeps one packed
state (``*_shared_state``). Both run on every backend (the cuda one as in the
C++ API; tests/python runs them on reference and cpu), through DLPack
directly: no torch custom ops, so eager only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from . import _C

_NP = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "i32": "int32",
       "u8": "uint8"}


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

        if device is None:  # cupy's current device
            return cupy.zeros(tuple(shape), dtype=name)
        with cupy.cuda.Device(int(getattr(device, "id", device))):
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


_ALIGN = 64  # packed tiles need 16-byte aligned rows; numpy only guarantees 16


def _tile_bytes(fn: str, func, read_format: str, **shape) -> int:
    """Packed tile bytes; an unknown format is reported as `fn`'s read_format."""
    try:
        return func(format=read_format, **shape)
    except _C.Error as e:
        msg = str(e)
        if "argument 'format'" not in msg:
            raise
        raise _C.Error(f"{fn}: argument 'read_format': {msg.split(': ', 2)[-1]}") from None


def _alloc_packed(lib: str, layers: Optional[int], shape, device: Any) -> List[Any]:
    """Like _alloc for uint8 packed tiles [.., tile_bytes], the data 64-byte aligned."""
    full = shape if layers is None else (layers, *shape)
    if lib != "numpy":
        bufs = [_zeros(lib, full, "u8", device)]
    else:
        import numpy  # noqa: PLC0415

        n = 1
        for d in full:
            n *= int(d)
        raw = numpy.zeros(n + _ALIGN, dtype=numpy.uint8)
        off = (-raw.ctypes.data) % _ALIGN
        bufs = [raw[off:off + n].reshape(full)]
    return bufs if layers is None else [bufs[0][i] for i in range(layers)]


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
    read_copy [S, H, tile_bytes] uint8  dual pools: packed copy of the checkpoint
    read_format           'bf16' | 'fp16' | 'fp8' | 'nvfp4' (with read_copy)
    """

    state: Any
    ring_x: Any = None
    ring_dt: Any = None
    ring_B: Any = None
    cursor: Any = None
    L: int = 16
    A: Any = None
    read_copy: Any = None
    read_format: Optional[str] = None

    @property
    def is_replay(self) -> bool:
        return self.cursor is not None

    @property
    def is_dual(self) -> bool:
        return self.read_copy is not None

    def fields(self) -> Dict[str, Any]:
        f = {"state": self.state, "ring_x": self.ring_x, "ring_dt": self.ring_dt,
             "ring_B": self.ring_B, "cursor": self.cursor, "L": self.L}
        if self.read_copy is not None:
            f.update(read_copy=self.read_copy, read_format=self.read_format or "bf16")
        return f


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
    read_copy [S, HV, tile_bytes]    uint8, dual pools: packed copy of the checkpoint
    read_format                      'bf16' | 'fp16' | 'fp8' | 'nvfp4' (with read_copy)
    ring_v  [S, R, HV, V]            dual pools: v records, dtype of v
    ring_beta [S, R, HV]             dual pools: β records (after sigmoid), fp32
    """

    state: Any
    ring_d: Any = None
    ring_k: Any = None
    ring_ks: Any = None
    ring_g: Any = None
    cursor: Any = None
    L: int = 16
    family: str = "gdn"
    read_copy: Any = None
    read_format: Optional[str] = None
    ring_v: Any = None
    ring_beta: Any = None

    @property
    def is_replay(self) -> bool:
        return self.cursor is not None

    @property
    def is_dual(self) -> bool:
        return self.read_copy is not None

    def fields(self) -> Dict[str, Any]:
        f = {"state": self.state, "ring_d": self.ring_d, "ring_k": self.ring_k,
             "ring_ks": self.ring_ks, "ring_g": self.ring_g, "cursor": self.cursor,
             "L": self.L}
        if self.read_copy is not None:
            f.update(read_copy=self.read_copy, read_format=self.read_format or "bf16")
        if self.ring_v is not None:
            f["ring_v"] = self.ring_v
        if self.ring_beta is not None:
            f["ring_beta"] = self.ring_beta
        return f


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
                A: Any = None, read_format: Optional[str] = None, lib: str = "numpy",
                device: Any = None,
                layers: Optional[int] = None) -> Union[Mamba2Pool, List[Mamba2Pool]]:
    """Zeroed Mamba-2 pool for `slots` slots (all slots empty).

    replay=False gives a baseline pool (state only). With `layers`, returns a
    list of per-layer pools viewing layer-major buffers [layers, slots, ...].
    read_format ('bf16' | 'fp16' | 'fp8' | 'nvfp4') makes a dual pool: a read
    copy uint8 [slots, H, mamba2_tile_bytes] (replay pools only).
    """
    sd, ad = _norm(state_dtype), _norm(act_dtype)
    R = _C.mamba2_ring_length(L=L, T_max=T_max)
    if read_format is not None and not replay:
        raise _C.Error("mamba2_pool: argument 'read_format': a read copy needs a replay pool "
                       "(replay=True), got replay=False")
    tile = (None if read_format is None else
            _tile_bytes("mamba2_pool", _C.mamba2_tile_bytes, read_format, H=H, P=P, N=N, G=G))
    st = _alloc(lib, layers, (slots, H, P, N), sd, device)
    n = len(st)
    if not replay:
        return _one([Mamba2Pool(state=st[i], L=L, A=A) for i in range(n)], layers)
    rx = _alloc(lib, layers, (slots, R, H, P), ad, device)
    rdt = _alloc(lib, layers, (slots, R, H), "fp32", device)
    rb = _alloc(lib, layers, (slots, R, G, N), ad, device)
    cur = _alloc(lib, layers, (slots, 3), "i32", device)
    rc = [None] * n if tile is None else _alloc_packed(lib, layers, (slots, H, tile), device)
    return _one([Mamba2Pool(st[i], rx[i], rdt[i], rb[i], cur[i], L, A, rc[i], read_format)
                 for i in range(n)], layers)


def delta_pool(family: str, slots: int, H: int, HV: int, K: int, V: int, *, L: int = 16,
               T_max: int = 1, state_dtype: Any = "fp32", act_dtype: Any = "bf16",
               d_dtype: Any = "fp32", replay: bool = True, read_format: Optional[str] = None,
               lib: str = "numpy", device: Any = None,
               layers: Optional[int] = None) -> Union[DeltaPool, List[DeltaPool]]:
    """Zeroed GDN / KDA pool (family 'gdn' | 'kda'); see mamba2_pool.
    read_format makes a dual pool: read copy uint8 [slots, HV, delta_tile_bytes],
    ring_v [slots, R, HV, V] (act_dtype) and ring_beta [slots, R, HV] fp32."""
    if family not in ("gdn", "kda"):
        raise _C.Error(f"delta_pool: argument 'family': expected gdn | kda, got '{family}'")
    sd, ad, dd = _norm(state_dtype), _norm(act_dtype), _norm(d_dtype)
    R = _C.delta_ring_length(L=L, T_max=T_max)
    if read_format is not None and not replay:
        raise _C.Error("delta_pool: argument 'read_format': a read copy needs a replay pool "
                       "(replay=True), got replay=False")
    tile = (None if read_format is None else
            _tile_bytes("delta_pool", _C.delta_tile_bytes, read_format, H=H, HV=HV, K=K, V=V))
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
    if tile is None:
        return _one([DeltaPool(st[i], rd[i], rk[i], rks[i], rg[i], cur[i], L, family)
                     for i in range(n)], layers)
    rc = _alloc_packed(lib, layers, (slots, HV, tile), device)
    rv = _alloc(lib, layers, (slots, R, HV, V), ad, device)
    rbeta = _alloc(lib, layers, (slots, R, HV), "fp32", device)
    return _one([DeltaPool(st[i], rd[i], rk[i], rks[i], rg[i], cur[i], L, family, rc[i],
                           read_format, rv[i], rbeta[i]) for i in range(n)], layers)


def mamba2_shared_state(slots: int, H: int, P: int, N: int, G: int, *, format: str,
                        lib: str = "numpy", device: Any = None,
                        layers: Optional[int] = None) -> Union[Any, List[Any]]:
    """Zeroed packed state of the shared mode, uint8 [slots, H, mamba2_tile_bytes]
    (one tile [P, N] per (slot, head)); see mamba2_decode_shared. Zero bytes
    decode to a zero state in every format."""
    tile = _C.mamba2_tile_bytes(format=format, H=H, P=P, N=N, G=G)
    return _one(_alloc_packed(lib, layers, (slots, H, tile), device), layers)


def delta_shared_state(slots: int, H: int, HV: int, K: int, V: int, *, format: str,
                       lib: str = "numpy", device: Any = None,
                       layers: Optional[int] = None) -> Union[Any, List[Any]]:
    """Zeroed packed GDN / KDA state, uint8 [slots, HV, delta_tile_bytes] (tiles [V, K])."""
    tile = _C.delta_tile_bytes(format=format, H=H, HV=HV, K=K, V=V)
    return _one(_alloc_packed(lib, layers, (slots, HV, tile), device), layers)


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
                         T_max: int = 1, read_format: str = "bf16") -> int:
    """Bytes one slot of one layer occupies. mode: 'replay' (checkpoint, ring,
    cursor), 'snapshot' (1 + drafts = T_max full states), 'baseline' (one
    state), 'dual' (replay + read copy in read_format) or 'shared' (one packed
    state in read_format)."""
    sd = _norm(state_dtype)
    if mode in ("dual", "shared"):
        return _C.mamba2_state_bytes_per_row(mode=mode, H=H, P=P, N=N, G=G, state_dtype=sd,
                                             read_format=read_format,
                                             act_dtype=_norm(act_dtype), L=L, T_max=T_max)
    if mode == "replay":
        return _C.mamba2_replay_bytes_per_row(H=H, P=P, N=N, G=G, state_dtype=sd,
                                              act_dtype=_norm(act_dtype), L=L, T_max=T_max)
    return _C.mamba2_snapshot_bytes_per_row(H=H, P=P, N=N, G=G, state_dtype=sd,
                                            T_max=T_max if mode == "snapshot" else 1)


def delta_bytes_per_row(family: str, H: int, HV: int, K: int, V: int, *, mode: str = "replay",
                        state_dtype: Any = "fp32", act_dtype: Any = "bf16",
                        d_dtype: Any = "fp32", L: int = 16, T_max: int = 1,
                        read_format: str = "bf16") -> int:
    """Bytes one slot of one layer occupies; see mamba2_bytes_per_row (the
    'dual' mode also counts the v and β records of every ring entry)."""
    sd = _norm(state_dtype)
    if mode in ("dual", "shared"):
        return _C.delta_state_bytes_per_row(mode=mode, family=family, H=H, HV=HV, K=K, V=V,
                                            state_dtype=sd, read_format=read_format,
                                            act_dtype=_norm(act_dtype), d_dtype=_norm(d_dtype),
                                            L=L, T_max=T_max)
    if mode == "replay":
        return _C.delta_replay_bytes_per_row(family=family, H=H, HV=HV, K=K, V=V, state_dtype=sd,
                                             act_dtype=_norm(act_dtype), d_dtype=_norm(d_dtype),
                                             L=L, T_max=T_max)
    return _C.delta_snapshot_bytes_per_row(H=H, HV=HV, K=K, V=V, state_dtype=sd,
                                           T_max=T_max if mode == "snapshot" else 1)

"""Routing of one library call: torch tensors go through the torch custom ops
(``torch.ops.replayssm.*``, see ``_ops.py``) so that torch.compile and CUDA
graphs see them; numpy / cupy / other DLPack arrays go straight to the
extension ``_C``.

Backend: ``None`` picks ``"cuda"`` when the data lives on a CUDA device and
``"cpu"`` otherwise. Stream: ``None`` picks the producer's current stream
(torch: ``torch.cuda.current_stream()``, cupy: ``cupy.cuda.get_current_stream()``),
else 0 (the legacy default stream); a direct call runs with the data's GPU
as the current device (torch.ops calls do the same in ``_ops.py``). CUDA
arrays are handed over as DLPack
capsules exported with ``stream=-1`` (no producer-side synchronisation): the
library launches on the stream that wrote them, so none is needed, and the
export stays legal during CUDA-graph capture.
"""
from __future__ import annotations

import sys
from typing import Any, Dict

from . import _C

_DLPACK_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged


_torch = None  # the torch module once the custom ops are loaded (no lookups while tracing)


def is_torch(a: Any) -> bool:
    torch = _torch if _torch is not None else sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def framework(a: Any) -> str:
    """'torch' | 'numpy' | 'cupy' | the array type's top-level module name."""
    return type(a).__module__.split(".")[0]


def on_cuda(a: Any) -> bool:
    dev = getattr(a, "__dlpack_device__", None)
    return dev is not None and dev()[0] in _DLPACK_CUDA


def _export(a: Any) -> Any:
    """A CUDA array as an unsynchronised DLPack capsule; anything else as is."""
    if on_cuda(a):
        try:
            return a.__dlpack__(stream=-1)
        except (TypeError, BufferError, NotImplementedError):
            return a
    return a


def _current_stream(a: Any) -> int:
    """The producer's current stream on a's device (torch, cupy), else 0."""
    if is_torch(a):
        torch = _torch if _torch is not None else sys.modules["torch"]
        return int(torch.cuda.current_stream(a.device).cuda_stream)
    if framework(a) == "cupy":
        import cupy  # noqa: PLC0415 (only when cupy arrays are passed)

        with cupy.cuda.Device(a.device.id):
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


class _on_device:
    """Makes a's GPU the current device for the call (torch, cupy CUDA
    arrays); a no-op for anything else. The library launches on the current
    device."""

    def __init__(self, a: Any):
        self._ctx = None
        if not on_cuda(a):
            return
        if is_torch(a):
            torch = _torch if _torch is not None else sys.modules["torch"]
            self._ctx = torch.cuda.device(a.device)
        elif framework(a) == "cupy":
            import cupy  # noqa: PLC0415

            self._ctx = cupy.cuda.Device(a.device.id)

    def __enter__(self):
        if self._ctx is not None:
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


_ops_loaded = False


def load_torch_ops() -> None:
    """Register the torch custom ops (idempotent). Called on import of
    replayssm when torch is already imported, else on the first torch call."""
    global _ops_loaded, _torch
    if not _ops_loaded:
        import torch  # noqa: PLC0415

        from . import _ops  # noqa: F401,PLC0415

        _torch, _ops_loaded = torch, True


# Calls that have no torch custom op: the dual / shared precision modes.
# Torch tensors in them go straight to _C through DLPack, like numpy arrays,
# on torch's current stream and the tensors' device (eager only:
# torch.compile and CUDA graphs do not see them).
_NO_TORCH_OP = ("mamba2_decode_shared", "delta_decode_shared")
_DUAL_FIELDS = ("read_copy", "ring_v", "ring_beta")


def call(name: str, kw: Dict[str, Any], first: Any) -> None:
    """Run operation `name` with keyword arguments `kw` (names as in _C).
    `first` is a representative array (framework, device)."""
    # A workspace (cpu backend scratch) has no torch-op argument either: such
    # calls go straight to _C too (eager).
    direct = (name in _NO_TORCH_OP or any(kw.get(k) is not None for k in _DUAL_FIELDS)
              or kw.get("workspace") is not None)
    if is_torch(first) and not direct:
        if not _ops_loaded:
            load_torch_ops()
        if kw.get("backend") is None:
            kw["backend"] = ""
        if kw.get("stream") is not None:
            raise _C.Error(f"{name}: argument 'stream': expected None for torch tensors (the "
                           "current torch stream is used), got a stream handle")
        kw.pop("stream", None)
        kw.pop("workspace", None)  # None here; the torch ops take no workspace
        getattr(_torch.ops.replayssm, name)(**kw)
        return
    cuda = on_cuda(first)
    if kw.get("backend") is None:
        kw["backend"] = "cuda" if cuda else "cpu"
    if kw.get("stream") is None:
        kw["stream"] = _current_stream(first) if cuda else 0
    args = {k: (_export(v) if v is not None and hasattr(v, "__dlpack__") else v)
            for k, v in kw.items() if v is not None}
    with _on_device(first):
        getattr(_C, name)(**args)


def empty(like: Any, shape, dtype: Any = None) -> Any:
    """Uninitialised array of `shape` in `like`'s framework and device.
    dtype: None (like's), or a name 'float32' | 'int32'."""
    if not hasattr(like, "shape") or not hasattr(like, "dtype"):
        raise TypeError(f"expected an array (numpy, torch, cupy, DLPack), got {type(like)!r}")
    if is_torch(like):
        torch = _torch if _torch is not None else sys.modules["torch"]
        dt = like.dtype if dtype is None else getattr(torch, dtype)
        return torch.empty(tuple(shape), dtype=dt, device=like.device)
    fw = framework(like)
    mod = sys.modules.get(fw)
    if mod is None or not hasattr(mod, "empty"):
        import numpy as mod  # noqa: PLC0415
    with _on_device(like):  # cupy allocates on its current device
        return mod.empty(tuple(shape), dtype=like.dtype if dtype is None else dtype)


def empty_like(a: Any) -> Any:
    """Uninitialised array with `a`'s shape, dtype, framework and device."""
    if not hasattr(a, "shape"):
        raise TypeError(f"expected an array (numpy, torch, cupy, DLPack), got {type(a)!r}")
    return empty(a, a.shape)


def arange(like: Any, n: int) -> Any:
    """int32 [0, n) in `like`'s framework and device."""
    if is_torch(like):
        torch = _torch if _torch is not None else sys.modules["torch"]
        return torch.arange(n, dtype=torch.int32, device=like.device)
    fw = framework(like)
    mod = sys.modules.get(fw)
    if mod is None or not hasattr(mod, "arange"):
        import numpy as mod  # noqa: PLC0415
    with _on_device(like):
        return mod.arange(n, dtype="int32")


def elem_strides(a: Any):
    """Strides in elements (torch reports elements, numpy / cupy bytes)."""
    if is_torch(a):
        return tuple(a.stride())
    return tuple(s // a.itemsize for s in a.strides)


def dtype_name(dt: Any) -> str:
    """'fp32' | 'fp16' | 'bf16' from a torch / numpy dtype or a name."""
    s = str(dt).replace("torch.", "")
    return {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16",
            "bfloat16": "bf16"}.get(s, s)

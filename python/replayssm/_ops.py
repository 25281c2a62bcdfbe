"""torch.library custom ops ``torch.ops.replayssm.*`` over the extension.

Imported only when torch is present (replayssm imports it when torch is
already loaded, else on the first call with a torch tensor; ``import
replayssm.torch_ops`` loads it explicitly). Each op mirrors one ``_C``
function: same argument names, outputs and pool tensors marked mutable
(``Tensor(a!)``), no return value. Fake (meta) implementations do nothing,
which is exact for ops that only write their arguments, so the ops trace
under torch.compile (auto_functionalize) and run under CUDA-graph capture
(the real implementation launches on ``torch.cuda.current_stream()``, the
capturing stream, and exports tensors without DLPack stream synchronisation).
"""
from __future__ import annotations

import torch

from . import _C
from ._dispatch import _current_stream, _on_device
from ._schemas import SCHEMAS
from ._schemas import arg_names as _arg_names


def _export(t: torch.Tensor):
    t = t.detach()
    if t.is_cuda:
        return t.__dlpack__(stream=-1)  # no producer-side stream synchronisation
    return t


def _make_impl(name: str):
    fn = getattr(_C, name)

    def impl(*args, **kwargs):
        kw = dict(zip(_arg_names(SCHEMAS[name]), args))
        kw.update(kwargs)
        first = next(v for v in kw.values() if isinstance(v, torch.Tensor))
        stream = _current_stream(first) if first.is_cuda else 0
        if not kw.get("backend"):
            kw["backend"] = "cuda" if first.is_cuda else "cpu"
        out = {k: (_export(v) if isinstance(v, torch.Tensor) else v)
               for k, v in kw.items() if v is not None}
        with _on_device(first):
            fn(stream=stream, **out)

    impl.__name__ = name
    return impl


def _fake(*args, **kwargs):  # every op only writes its (mutable) arguments
    return None


_lib = torch.library.Library("replayssm", "DEF")
for _name, _schema in SCHEMAS.items():
    _lib.define(f"{_name}({_schema}) -> ()")
    _impl = _make_impl(_name)
    _lib.impl(_name, _impl, "CPU")
    _lib.impl(_name, _impl, "CUDA")
    if hasattr(torch.library, "register_fake"):
        torch.library.register_fake(f"replayssm::{_name}", _fake, lib=_lib)
    else:  # torch < 2.4
        torch.library.impl_abstract(f"replayssm::{_name}", _fake, lib=_lib)

"""replayssm: replay decode for Mamba-2, Gated DeltaNet and Kimi Delta Attention.

Arrays are taken zero-copy through DLPack: numpy (CPU), torch (CPU / CUDA),
cupy (CUDA). With torch tensors every call goes through the custom ops
``torch.ops.replayssm.*`` (torch.compile and CUDA graphs work); other arrays
call the extension directly. See docs/python.md and docs/integration.md.

    replayssm.Error          ValueError raised by every rejected call
    replayssm.mamba2_*       decode, snapshot_decode, prefill, replay_step, commit,
                             materialize, flush, copy_slot, reset_slot
    replayssm.delta_*        the same for GDN / KDA (family='gdn' | 'kda')
    replayssm.conv1d_*       causal conv1d update (with rollback), commit and prefill
    replayssm.*_pool         pool allocation (read_format=...: dual pools); *_bytes_per_row
    replayssm.*_workspace_bytes  scratch of one call (cpu backend: workspace=...)
    replayssm.*_decode_shared  shared-precision decode on a packed state (*_shared_state)
    replayssm.adapters       vLLM-compatible entry points
"""
from __future__ import annotations

import sys as _sys

from . import _C
from ._C import Error, cuda_available
from ._api import (conv1d_commit, conv1d_prefill, conv1d_update, delta_commit, delta_copy_slot,
                   delta_decode, delta_decode_shared, delta_flush, delta_materialize,
                   delta_prefill, delta_replay_step, delta_reset_slot, delta_snapshot_decode,
                   mamba2_commit, mamba2_copy_slot, mamba2_decode, mamba2_decode_shared,
                   mamba2_flush, mamba2_materialize, mamba2_prefill, mamba2_replay_step,
                   mamba2_reset_slot, mamba2_snapshot_decode)
from ._dispatch import load_torch_ops
from .pools import (Conv1dPool, DeltaPool, Mamba2Pool, conv1d_pool, delta_bytes_per_row,
                    delta_pool, delta_shared_state, mamba2_bytes_per_row, mamba2_pool,
                    mamba2_shared_state)

__version__ = "0.1.0"

ring_length = _C.mamba2_ring_length  # R = L + T_max (the same for every family)
mamba2_tile_bytes = _C.mamba2_tile_bytes  # bytes of one packed (slot, head) tile
delta_tile_bytes = _C.delta_tile_bytes
READ_FORMATS = ("bf16", "fp16", "fp8", "nvfp4")
conv1d_state_rows = _C.conv1d_state_rows  # W - 1 + T_max
# Bytes of scratch one call needs on a backend (cpu: the `workspace=` of the
# operations; 0 on reference and cuda), growing with B, T and L.
mamba2_workspace_bytes = _C.mamba2_workspace_bytes
delta_workspace_bytes = _C.delta_workspace_bytes
conv1d_workspace_bytes = _C.conv1d_workspace_bytes
WORKSPACE_ALIGN = 64  # bytes; a workspace's first byte must be aligned to it


def check_device_status(device_status, *, backend: str = "cuda", stream=None) -> None:
    """Synchronise `stream`, read and clear device_status (int32 [1]) and raise
    replayssm.Error when a StatusBit is set (bad slot, bad accepted count,
    ring overflow, uncommitted records)."""
    from ._dispatch import _current_stream, is_torch  # noqa: PLC0415

    if stream is None:
        if is_torch(device_status) and device_status.is_cuda:
            import torch  # noqa: PLC0415

            stream = torch.cuda.current_stream(device_status.device).cuda_stream
            device_status = device_status.__dlpack__(stream=-1)
        else:
            stream = _current_stream(device_status)
    _C.check_device_status(backend=backend, stream=int(stream), device_status=device_status)


STATUS_BAD_SLOT = 1
STATUS_BAD_ACCEPTED = 2
STATUS_RING_OVERFLOW = 4
STATUS_UNCOMMITTED = 8

if "torch" in _sys.modules:  # torch already loaded: register the custom ops now
    load_torch_ops()

__all__ = [
    "Error", "cuda_available", "check_device_status", "load_torch_ops", "ring_length",
    "conv1d_state_rows", "Mamba2Pool", "DeltaPool", "Conv1dPool", "mamba2_pool", "delta_pool",
    "conv1d_pool", "mamba2_bytes_per_row", "delta_bytes_per_row", "mamba2_shared_state",
    "delta_shared_state", "mamba2_tile_bytes", "delta_tile_bytes", "READ_FORMATS",
    "mamba2_decode_shared", "delta_decode_shared",
    "mamba2_decode", "mamba2_snapshot_decode", "mamba2_prefill", "mamba2_replay_step",
    "mamba2_commit", "mamba2_materialize", "mamba2_flush", "mamba2_copy_slot",
    "mamba2_reset_slot", "delta_decode", "delta_snapshot_decode", "delta_prefill",
    "delta_replay_step", "delta_commit", "delta_materialize", "delta_flush", "delta_copy_slot",
    "delta_reset_slot", "conv1d_update", "conv1d_commit", "conv1d_prefill",
]

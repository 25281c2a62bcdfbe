"""Typing stub of the nanobind extension replayssm._C (python/src/module*.cpp).

Array: any DLPack / buffer-protocol array (numpy, torch, cupy) or a DLPack
capsule, viewed zero-copy. Every operation is keyword-only; the common
keywords are backend ('reference' | 'cpu' | 'cuda'), stream (cudaStream_t as
int, 0 = default), num_threads (cpu; 0 = all), device_status (int32 [1] on
the device, optional), workspace (contiguous host array, the cpu backend's
scratch; optional). Shapes: see replayssm/_api.py and the C++ headers.
"""
from typing import Any, Optional

Array = Any

class Error(ValueError):
    """A rejected call: '<function>: argument '<arg>': expected <...>, got <...>'."""

def cuda_available() -> bool: ...
def check_device_status(*, backend: str, stream: int, device_status: Array) -> None: ...
def dtype_size(dtype: str) -> int: ...

# Mamba-2: x [B,T,H,P], dt [B,T,H], B/C [B,T,G,N], A/dt_bias/D [H] fp32, y [B,T,H,P],
# state [S,H,P,N], ring_x [S,R,H,P], ring_dt [S,R,H], ring_B [S,R,G,N], cursor [S,3] int32.
def mamba2_decode(*, x: Array, dt: Array, B: Array, C: Array, A: Array, y: Array, slot: Array,
                  z: Optional[Array] = None, dt_bias: Optional[Array] = None,
                  D: Optional[Array] = None, dt_softplus: bool = True, pad_slot_id: int = -1,
                  state: Array, backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                  device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_snapshot_decode(*, x: Array, dt: Array, B: Array, C: Array, A: Array, y: Array,
                           slot: Array, z: Optional[Array] = None,
                           dt_bias: Optional[Array] = None, D: Optional[Array] = None,
                           dt_softplus: bool = True, pad_slot_id: int = -1, state: Array,
                           state_indices: Array, num_accepted: Optional[Array] = None,
                           backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                           device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_prefill(*, x: Array, dt: Array, B: Array, C: Array, A: Array, y: Array,
                   cu_seqlens: Array, slot: Array, z: Optional[Array] = None,
                   dt_bias: Optional[Array] = None, D: Optional[Array] = None,
                   dt_softplus: bool = True, pad_slot_id: int = -1,
                   initial: Optional[Array] = None, state: Array,
                   ring_x: Optional[Array] = None, ring_dt: Optional[Array] = None,
                   ring_B: Optional[Array] = None, cursor: Optional[Array] = None, L: int = 16,
                   read_copy: Optional[Array] = None, read_format: str = "bf16",
                   backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                   device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_replay_step(*, x: Array, dt: Array, B: Array, C: Array, A: Array, y: Array,
                       slot: Array, z: Optional[Array] = None, dt_bias: Optional[Array] = None,
                       D: Optional[Array] = None, dt_softplus: bool = True,
                       pad_slot_id: int = -1, state: Array, ring_x: Optional[Array] = None,
                       ring_dt: Optional[Array] = None, ring_B: Optional[Array] = None,
                       cursor: Optional[Array] = None, L: int = 16,
                       read_copy: Optional[Array] = None, read_format: str = "bf16",
                       num_accepted: Optional[Array] = None, commit_all: bool = False,
                       backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                       device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_commit(*, state: Array, ring_x: Optional[Array] = None,
                  ring_dt: Optional[Array] = None, ring_B: Optional[Array] = None,
                  cursor: Optional[Array] = None, L: int = 16,
                  read_copy: Optional[Array] = None, read_format: str = "bf16",
                  slot: Array,
                  num_accepted: Array, pad_slot_id: int = -1, backend: str = "cpu",
                  stream: int = 0, num_threads: int = 0,
                  device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_materialize(*, state: Array, ring_x: Optional[Array] = None,
                       ring_dt: Optional[Array] = None, ring_B: Optional[Array] = None,
                       cursor: Optional[Array] = None, L: int = 16,
                       read_copy: Optional[Array] = None, read_format: str = "bf16",
                       A: Optional[Array] = None, slot: Array, out: Array,
                       pad_slot_id: int = -1, backend: str = "cpu", stream: int = 0,
                       num_threads: int = 0, device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_flush(*, state: Array, ring_x: Optional[Array] = None,
                 ring_dt: Optional[Array] = None, ring_B: Optional[Array] = None,
                 cursor: Optional[Array] = None, L: int = 16,
                 read_copy: Optional[Array] = None, read_format: str = "bf16",
                 A: Optional[Array] = None,
                 slot: Array, pad_slot_id: int = -1, backend: str = "cpu", stream: int = 0,
                 num_threads: int = 0, device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_copy_slot(*, state: Array, ring_x: Optional[Array] = None,
                     ring_dt: Optional[Array] = None, ring_B: Optional[Array] = None,
                     cursor: Optional[Array] = None, L: int = 16,
                     read_copy: Optional[Array] = None, read_format: str = "bf16",
                     src: Array, dst: Array,
                     pad_slot_id: int = -1, backend: str = "cpu", stream: int = 0,
                     num_threads: int = 0, device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_reset_slot(*, state: Array, ring_x: Optional[Array] = None,
                      ring_dt: Optional[Array] = None, ring_B: Optional[Array] = None,
                      cursor: Optional[Array] = None, L: int = 16,
                      read_copy: Optional[Array] = None, read_format: str = "bf16",
                      slot: Array,
                      pad_slot_id: int = -1, backend: str = "cpu", stream: int = 0,
                      num_threads: int = 0, device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_ring_length(L: int, T_max: int) -> int: ...
def mamba2_replay_bytes_per_row(*, H: int, P: int, N: int, G: int, state_dtype: str,
                                act_dtype: str, L: int, T_max: int) -> int: ...
# Dual pools: read_copy [S,H,tile_bytes] uint8 with read_format 'bf16' | 'fp16' | 'fp8' |
# 'nvfp4' (GDN / KDA also ring_v [S,R,HV,V], ring_beta [S,R,HV] fp32); reference / cpu only.
def mamba2_decode_shared(*, x: Array, dt: Array, B: Array, C: Array, A: Array, y: Array,
                         slot: Array, z: Optional[Array] = None,
                         dt_bias: Optional[Array] = None, D: Optional[Array] = None,
                         dt_softplus: bool = True, pad_slot_id: int = -1, packed_state: Array,
                         format: str, stochastic: bool = False, seed: int = 0, step: int = 0,
                         backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                         device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def mamba2_tile_bytes(*, format: str, H: int, P: int, N: int, G: int) -> int: ...
def mamba2_state_bytes_per_row(*, mode: str, H: int, P: int, N: int, G: int,
                               state_dtype: str = "fp32", read_format: str = "bf16",
                               act_dtype: str = "bf16", L: int = 16, T_max: int = 1) -> int: ...
def mamba2_workspace_bytes(*, op: str, H: int, P: int, N: int, G: int, B: int, T: int = 1,
                           L: int = 16, backend: str = "cpu", num_threads: int = 0) -> int: ...
def mamba2_snapshot_bytes_per_row(*, H: int, P: int, N: int, G: int, state_dtype: str,
                                  T_max: int) -> int: ...

# GDN / KDA (family 'gdn' | 'kda'): q/k [B,T,H,K], v/o [B,T,HV,V], g GDN [B,T,HV] /
# KDA [B,T,HV,K], beta [B,T,HV], state [S,HV,V,K], ring_d [S,R,HV,V], ring_k [S,R,H,K],
# ring_ks [S,R,H], ring_g GDN [S,R,HV] / KDA [S,R,HV,K], cursor [S,3] int32.
def delta_decode(*, family: str, q: Array, k: Array, v: Array, g: Array, beta: Array, o: Array,
                 A_log: Optional[Array] = None, dt_bias: Optional[Array] = None,
                 raw_gate: bool = True, raw_beta: bool = True, l2norm_qk: bool = True,
                 q_scale: float = 0.0, pad_slot_id: int = -1, slot: Array, state: Array,
                 backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                 device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_snapshot_decode(*, family: str, q: Array, k: Array, v: Array, g: Array, beta: Array,
                          o: Array, A_log: Optional[Array] = None,
                          dt_bias: Optional[Array] = None, raw_gate: bool = True,
                          raw_beta: bool = True, l2norm_qk: bool = True, q_scale: float = 0.0,
                          pad_slot_id: int = -1, state: Array, state_indices: Array,
                          num_accepted: Optional[Array] = None, backend: str = "cpu",
                          stream: int = 0, num_threads: int = 0,
                          device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_prefill(*, family: str, q: Array, k: Array, v: Array, g: Array, beta: Array,
                  o: Array, A_log: Optional[Array] = None, dt_bias: Optional[Array] = None,
                  raw_gate: bool = True, raw_beta: bool = True, l2norm_qk: bool = True,
                  q_scale: float = 0.0, pad_slot_id: int = -1, cu_seqlens: Array, slot: Array,
                  initial: Optional[Array] = None, state: Array,
                  ring_d: Optional[Array] = None, ring_k: Optional[Array] = None,
                  ring_ks: Optional[Array] = None, ring_g: Optional[Array] = None,
                  cursor: Optional[Array] = None, L: int = 16,
                  read_copy: Optional[Array] = None, read_format: str = "bf16",
                  ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                  backend: str = "cpu",
                  stream: int = 0, num_threads: int = 0,
                  device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_replay_step(*, family: str, q: Array, k: Array, v: Array, g: Array, beta: Array,
                      o: Array, A_log: Optional[Array] = None, dt_bias: Optional[Array] = None,
                      raw_gate: bool = True, raw_beta: bool = True, l2norm_qk: bool = True,
                      q_scale: float = 0.0, pad_slot_id: int = -1, slot: Array, state: Array,
                      ring_d: Optional[Array] = None, ring_k: Optional[Array] = None,
                      ring_ks: Optional[Array] = None, ring_g: Optional[Array] = None,
                      cursor: Optional[Array] = None, L: int = 16,
                      read_copy: Optional[Array] = None, read_format: str = "bf16",
                      ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                      num_accepted: Optional[Array] = None, commit_all: bool = False,
                      backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                      device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_commit(*, family: str, state: Array, ring_d: Optional[Array] = None,
                 ring_k: Optional[Array] = None, ring_ks: Optional[Array] = None,
                 ring_g: Optional[Array] = None, cursor: Optional[Array] = None, L: int = 16,
                 read_copy: Optional[Array] = None, read_format: str = "bf16",
                 ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                 slot: Array, num_accepted: Array, pad_slot_id: int = -1, backend: str = "cpu",
                 stream: int = 0, num_threads: int = 0,
                 device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_materialize(*, family: str, state: Array, ring_d: Optional[Array] = None,
                      ring_k: Optional[Array] = None, ring_ks: Optional[Array] = None,
                      ring_g: Optional[Array] = None, cursor: Optional[Array] = None,
                      L: int = 16,
                      read_copy: Optional[Array] = None, read_format: str = "bf16",
                      ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                      slot: Array, out: Array, pad_slot_id: int = -1,
                      backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                      device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_flush(*, family: str, state: Array, ring_d: Optional[Array] = None,
                ring_k: Optional[Array] = None, ring_ks: Optional[Array] = None,
                ring_g: Optional[Array] = None, cursor: Optional[Array] = None, L: int = 16,
                read_copy: Optional[Array] = None, read_format: str = "bf16",
                ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                slot: Array, pad_slot_id: int = -1, backend: str = "cpu", stream: int = 0,
                num_threads: int = 0, device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_copy_slot(*, family: str, state: Array, ring_d: Optional[Array] = None,
                    ring_k: Optional[Array] = None, ring_ks: Optional[Array] = None,
                    ring_g: Optional[Array] = None, cursor: Optional[Array] = None,
                    L: int = 16,
                    read_copy: Optional[Array] = None, read_format: str = "bf16",
                    ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                    src: Array, dst: Array, pad_slot_id: int = -1,
                    backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                    device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_reset_slot(*, family: str, state: Array, ring_d: Optional[Array] = None,
                     ring_k: Optional[Array] = None, ring_ks: Optional[Array] = None,
                     ring_g: Optional[Array] = None, cursor: Optional[Array] = None,
                     L: int = 16,
                     read_copy: Optional[Array] = None, read_format: str = "bf16",
                     ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                     slot: Array, pad_slot_id: int = -1, backend: str = "cpu",
                     stream: int = 0, num_threads: int = 0,
                     device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_ring_length(L: int, T_max: int) -> int: ...
def delta_replay_bytes_per_row(*, family: str, H: int, HV: int, K: int, V: int,
                               state_dtype: str, act_dtype: str, d_dtype: str = "fp32",
                               L: int = 16,
                               read_copy: Optional[Array] = None, read_format: str = "bf16",
                               ring_v: Optional[Array] = None, ring_beta: Optional[Array] = None,
                               T_max: int = 1) -> int: ...
def delta_decode_shared(*, family: str, q: Array, k: Array, v: Array, g: Array, beta: Array,
                        o: Array, A_log: Optional[Array] = None,
                        dt_bias: Optional[Array] = None, raw_gate: bool = True,
                        raw_beta: bool = True, l2norm_qk: bool = True, q_scale: float = 0.0,
                        pad_slot_id: int = -1, slot: Array, packed_state: Array, format: str,
                        stochastic: bool = False, seed: int = 0, step: int = 0,
                        backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                        device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def delta_tile_bytes(*, format: str, H: int, HV: int, K: int, V: int) -> int: ...
def delta_state_bytes_per_row(*, mode: str, family: str, H: int, HV: int, K: int, V: int,
                              state_dtype: str = "fp32", read_format: str = "bf16",
                              act_dtype: str = "bf16", d_dtype: str = "fp32", L: int = 16,
                              T_max: int = 1) -> int: ...
def delta_snapshot_bytes_per_row(*, H: int, HV: int, K: int, V: int, state_dtype: str,
                                 T_max: int = 1) -> int: ...

# conv1d: x/out [B,T,dim] (prefill [tokens,dim]), weight [dim,W], bias [dim],
# conv_state [S, W-1+T_max, dim], conv_pending [S] int32.
def conv1d_update(*, x: Array, weight: Array, out: Array, slot: Array, conv_state: Array,
                  conv_pending: Array, bias: Optional[Array] = None, silu: bool = True,
                  pad_slot_id: int = -1, num_accepted: Optional[Array] = None,
                  backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                  device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def conv1d_prefill(*, x: Array, weight: Array, out: Array, cu_seqlens: Array, slot: Array,
                   conv_state: Array, conv_pending: Array, bias: Optional[Array] = None,
                   silu: bool = True, pad_slot_id: int = -1, initial: Optional[Array] = None,
                   backend: str = "cpu", stream: int = 0, num_threads: int = 0,
                   device_status: Optional[Array] = None,
    workspace: Optional[Array] = None) -> None: ...
def conv1d_commit(*, conv_state: Array, conv_pending: Array, slot: Array, num_accepted: Array,
                  W: int, pad_slot_id: int = -1, backend: str = "cpu", stream: int = 0,
                  num_threads: int = 0, device_status: Optional[Array] = None,
                  workspace: Optional[Array] = None) -> None: ...
def conv1d_state_rows(W: int, T_max: int) -> int: ...
def delta_workspace_bytes(*, family: str, op: str, H: int, HV: int, K: int, V: int, B: int,
                          T: int = 1, L: int = 16, backend: str = "cpu",
                          num_threads: int = 0) -> int: ...
def conv1d_workspace_bytes(*, op: str, B: int, T: int = 1, dim: int, W: int,
                           backend: str = "cpu", num_threads: int = 0) -> int: ...

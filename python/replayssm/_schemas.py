"""The argument lists of the torch custom ops (``torch.ops.replayssm.*``),
kept free of torch so the dispatcher's arguments can be checked against them
without it (tests/python/test_dispatch.py). _ops.py registers them."""
from __future__ import annotations

import re
from typing import Dict, List

_EXEC = "str backend='', int num_threads=0, Tensor(z!)? device_status=None"
_M2_IN = ("Tensor x, Tensor dt, Tensor B, Tensor C, Tensor A, Tensor(a!) y, Tensor slot, "
          "Tensor? z=None, Tensor? dt_bias=None, Tensor? D=None, bool dt_softplus=True, "
          "int pad_slot_id=-1")
_M2_POOL = ("Tensor(b!) state, Tensor(c!)? ring_x=None, Tensor(d!)? ring_dt=None, "
            "Tensor(e!)? ring_B=None, Tensor(f!)? cursor=None, int L=16")
_DL_IN = ("str family, Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, Tensor(a!) o, "
          "Tensor? A_log=None, Tensor? dt_bias=None, bool raw_gate=True, bool raw_beta=True, "
          "bool l2norm_qk=True, float q_scale=0.0, int pad_slot_id=-1")
_DL_POOL = ("Tensor(b!) state, Tensor(c!)? ring_d=None, Tensor(d!)? ring_k=None, "
            "Tensor(e!)? ring_ks=None, Tensor(f!)? ring_g=None, Tensor(g!)? cursor=None, "
            "int L=16")

# Every argument after '*' is keyword-only, so defaults may precede
# required arguments without reordering the _C names.
SCHEMAS: Dict[str, str] = {
    "mamba2_decode": f"*, {_M2_IN}, Tensor(b!) state, {_EXEC}",
    "mamba2_snapshot_decode": f"*, {_M2_IN}, Tensor(b!) state, Tensor state_indices, "
                              f"Tensor? num_accepted=None, {_EXEC}",
    "mamba2_prefill": "*, Tensor x, Tensor dt, Tensor B, Tensor C, Tensor A, Tensor(a!) y, "
                      "Tensor cu_seqlens, Tensor slot, Tensor? z=None, Tensor? dt_bias=None, "
                      "Tensor? D=None, bool dt_softplus=True, int pad_slot_id=-1, "
                      f"Tensor? initial=None, {_M2_POOL}, {_EXEC}",
    "mamba2_replay_step": f"*, {_M2_IN}, {_M2_POOL}, Tensor? num_accepted=None, "
                          f"bool commit_all=False, {_EXEC}",
    "mamba2_commit": f"*, {_M2_POOL}, Tensor slot, Tensor num_accepted, int pad_slot_id=-1, "
                     f"{_EXEC}",
    "mamba2_materialize": f"*, {_M2_POOL}, Tensor? A=None, Tensor slot, Tensor(o!) out, "
                          f"int pad_slot_id=-1, {_EXEC}",
    "mamba2_flush": f"*, {_M2_POOL}, Tensor? A=None, Tensor slot, int pad_slot_id=-1, {_EXEC}",
    "mamba2_copy_slot": f"*, {_M2_POOL}, Tensor src, Tensor dst, int pad_slot_id=-1, {_EXEC}",
    "mamba2_reset_slot": f"*, {_M2_POOL}, Tensor slot, int pad_slot_id=-1, {_EXEC}",
    "delta_decode": f"*, {_DL_IN}, Tensor slot, Tensor(b!) state, {_EXEC}",
    "delta_snapshot_decode": f"*, {_DL_IN}, Tensor(b!) state, Tensor state_indices, "
                             f"Tensor? num_accepted=None, {_EXEC}",
    "delta_prefill": f"*, {_DL_IN}, Tensor cu_seqlens, Tensor slot, Tensor? initial=None, "
                     f"{_DL_POOL}, {_EXEC}",
    "delta_replay_step": f"*, {_DL_IN}, Tensor slot, {_DL_POOL}, Tensor? num_accepted=None, "
                         f"bool commit_all=False, {_EXEC}",
    "delta_commit": f"*, str family, {_DL_POOL}, Tensor slot, Tensor num_accepted, "
                    f"int pad_slot_id=-1, {_EXEC}",
    "delta_materialize": f"*, str family, {_DL_POOL}, Tensor slot, Tensor(o!) out, "
                         f"int pad_slot_id=-1, {_EXEC}",
    "delta_flush": f"*, str family, {_DL_POOL}, Tensor slot, int pad_slot_id=-1, {_EXEC}",
    "delta_copy_slot": f"*, str family, {_DL_POOL}, Tensor src, Tensor dst, int pad_slot_id=-1, "
                       f"{_EXEC}",
    "delta_reset_slot": f"*, str family, {_DL_POOL}, Tensor slot, int pad_slot_id=-1, {_EXEC}",
    "conv1d_update": "*, Tensor x, Tensor weight, Tensor(a!) out, Tensor slot, "
                     "Tensor(b!) conv_state, Tensor(c!) conv_pending, Tensor? bias=None, "
                     "bool silu=True, int pad_slot_id=-1, Tensor? num_accepted=None, "
                     f"{_EXEC}",
    "conv1d_commit": "*, Tensor(a!) conv_state, Tensor(b!) conv_pending, Tensor slot, "
                     f"Tensor num_accepted, int W, int pad_slot_id=-1, {_EXEC}",
    "conv1d_prefill": "*, Tensor x, Tensor weight, Tensor(a!) out, Tensor cu_seqlens, "
                      "Tensor slot, Tensor(b!) conv_state, Tensor(c!) conv_pending, "
                      "Tensor? bias=None, bool silu=True, int pad_slot_id=-1, "
                      f"Tensor? initial=None, {_EXEC}",
}


def arg_names(schema: str) -> List[str]:
    return [re.split(r"\s+", a.strip().split("=")[0])[-1]
            for a in schema.split(",") if a.strip() != "*"]

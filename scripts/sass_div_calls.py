#!/usr/bin/env python3
"""Calls of the compiler's 64-bit integer division routines, per kernel and source line.

`%` and `/` of 64-bit integers by a value the compiler does not know compile to
a call of `__cuda_sm20_{div,rem}_{s,u}64` (tens of instructions and a
branch), a 32-bit one by a runtime value to about twenty inline
instructions. Once per block that is noise; per sweep or per item it was
4–10 % of a step (docs/perf_notes_delta.md v34, perf_notes_mamba2.md v35a).
Lists, per kernel, the source lines (with the inlined caller's line) of every
such call, the kernels with the most calls first.

  nvdisasm -gi -c X.sm_90a.cubin > X.txt     # cuobjdump -xelf all <object or binary> extracts the cubins
  python3 scripts/sass_div_calls.py X.txt [more.txt ...] [--kernel REGEX]
"""
import collections
import re

from sass_listing import instructions, report

CALL = re.compile(r"CALL\.\S+\s+.*__cuda_sm20_(div|rem)_([su])64")


def scan(path):
    """{kernel: Counter(source location -> calls)} of one nvdisasm -gi listing."""
    calls = collections.defaultdict(collections.Counter)
    for kern, loc, insn in instructions(path):
        if insn is not None and not kern.startswith("$__internal") and CALL.search(insn):
            calls[kern][loc] += 1
    return calls


if __name__ == "__main__":
    report(scan, __doc__, "calls")

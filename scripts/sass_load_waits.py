#!/usr/bin/env python3
"""16-bit global loads whose value is widened right where they are issued.

A `LDG.E.U16` followed within two instructions by the instruction that widens
its register (`IMAD.U32 …, 0x10000` for bf16, `HADD2.F32` for f16, or a
`PRMT` / `SHF.L.U32` of it) makes the warp wait for that load before it
issues the next: a loop of such loads costs one round trip per element
(docs/perf_notes_delta.md v18, v19). Lists, per kernel, the source lines
(with the line of the inlined caller) of every such site.

  nvdisasm -gi -c X.sm_90a.cubin > X.txt     # cuobjdump -xelf all <binary> extracts the cubins
  python3 scripts/sass_load_waits.py X.txt [more.txt ...] [--kernel REGEX]
"""
import collections
import re

from sass_listing import instructions, report

WIDEN = re.compile(r"(@!?P\d\s+)?(IMAD\.U32|HADD2\.F32|PRMT|SHF\.L\.U32)\s+(R\d+),\s*(-RZ,\s*)?(R\d+)")
LOAD16 = re.compile(r"(@!?P\d\s+)?LDG\.E\.U16\S*\s+(R\d+),")


def scan(path):
    """{kernel: Counter(source location -> sites)} of one nvdisasm -gi listing."""
    sites = collections.defaultdict(collections.Counter)
    prev = []
    for kern, loc, insn in instructions(path):
        if insn is None:  # a new kernel
            prev = []
            continue
        w = WIDEN.match(insn)
        if w:
            for p_insn, p_loc in prev[-2:]:
                lm = LOAD16.match(p_insn)
                if lm and lm.group(2) == w.group(5):
                    sites[kern][p_loc] += 1
        prev = (prev + [(insn, loc)])[-3:]
    return sites


if __name__ == "__main__":
    report(scan, __doc__, "sites")

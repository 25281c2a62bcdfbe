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
import argparse
import collections
import re

WIDEN = re.compile(r"(@!?P\d\s+)?(IMAD\.U32|HADD2\.F32|PRMT|SHF\.L\.U32)\s+(R\d+),\s*(-RZ,\s*)?(R\d+)")
LOAD16 = re.compile(r"(@!?P\d\s+)?LDG\.E\.U16\S*\s+(R\d+),")
LINE = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def scan(path):
    """{kernel: Counter(source location -> sites)} of one nvdisasm -gi listing."""
    sites = collections.defaultdict(collections.Counter)
    kern, loc, prev = None, "?", []
    for line in open(path):
        if line.startswith("//-----") and ".text." in line:
            kern, prev = line.split(".text.", 1)[1].split()[0], []
            continue
        m = LINE.search(line)
        if m:
            loc = f"{m.group(1).split('/')[-1]}:{m.group(2)}"
            if m.group(3):
                loc += f" @ {m.group(3).split('/')[-1]}:{m.group(4)}"
            continue
        m = INSN.search(line)
        if not m or kern is None:
            continue
        insn = m.group(1)
        w = WIDEN.match(insn)
        if w:
            for p_insn, p_loc in prev[-2:]:
                lm = LOAD16.match(p_insn)
                if lm and lm.group(2) == w.group(5):
                    sites[kern][p_loc] += 1
        prev = (prev + [(insn, loc)])[-3:]
    return sites


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("listing", nargs="+", help="nvdisasm -gi output")
    ap.add_argument("--kernel", default="", help="regex on the mangled kernel name")
    a = ap.parse_args()
    for path in a.listing:
        for kern, c in scan(path).items():
            if not re.search(a.kernel, kern):
                continue
            print(f"{kern}: {sum(c.values())} sites")
            for loc, n in c.most_common():
                print(f"    {loc}  x{n}")


if __name__ == "__main__":
    main()

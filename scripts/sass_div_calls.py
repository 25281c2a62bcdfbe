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
import argparse
import collections
import re

CALL = re.compile(r"CALL\.\S+\s+.*__cuda_sm20_(div|rem)_([su])64")
LINE = re.compile(r'//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?')
INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def scan(path):
    """{kernel: Counter(source location -> calls)} of one nvdisasm -gi listing."""
    calls = collections.defaultdict(collections.Counter)
    kern, loc = None, "?"
    for line in open(path):
        if line.startswith("//-----") and ".text." in line:
            kern = line.split(".text.", 1)[1].split()[0]
            continue
        m = LINE.search(line)
        if m:
            loc = f"{m.group(1).split('/')[-1]}:{m.group(2)}"
            if m.group(3):
                loc += f" @ {m.group(3).split('/')[-1]}:{m.group(4)}"
            continue
        m = INSN.search(line)
        if m and kern is not None and not kern.startswith("$__internal") and CALL.search(m.group(1)):
            calls[kern][loc] += 1
    return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("listings", nargs="+", help="nvdisasm -gi -c outputs")
    ap.add_argument("--kernel", default="", help="only kernels whose name matches this regex")
    a = ap.parse_args()
    total = collections.defaultdict(collections.Counter)
    for path in a.listings:
        for kern, c in scan(path).items():
            if re.search(a.kernel, kern):
                total[kern].update(c)
    for kern, c in sorted(total.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"{sum(c.values()):4d}  {kern}")
        for loc, n in c.most_common():
            print(f"        {n:3d}  {loc}")
    if not total:
        print("no calls of the 64-bit division routines")


if __name__ == "__main__":
    main()

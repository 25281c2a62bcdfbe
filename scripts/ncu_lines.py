#!/usr/bin/env python3
"""Per-source-line instruction counts and stall samples of one profiled kernel.

ncu's CLI prints the source page per SASS instruction without source lines;
nvdisasm -g prints the SASS of the same cubin with line markers. This joins
the two by instruction offset and sums, per source line (and per function
region of lines), the executed warp instructions and the warp-stall samples.

  # on the GPU machine (ncu, cuobjdump and nvdisasm come with the toolkit):
  ncu --set full --import-source yes -k regex:KERNEL -c 1 -o prof <app ...>
  ncu -i prof.ncu-rep --page source --csv --print-source sass --print-kernel-base mangled > sass.csv
  cuobjdump -xelf all <app binary>            # one .cubin per architecture
  nvdisasm -g -c <the sm_90a cubin> > sass.txt
  # anywhere:
  python3 scripts/ncu_lines.py sass.csv sass.txt --kernel <mangled name> [--top 40]

The kernel's section in sass.txt is the one named --kernel exactly (or, for
a name that is not mangled, the first containing it); the CSV must come
from a profile of the same binary. scripts/gpu_check.sh profile does all of it.
"""
import argparse
import collections
import csv
import re
import sys


def read_csv(path):
    rows = list(csv.reader(open(path)))
    hdr_i = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr = rows[hdr_i]
    col = {name: hdr.index(name) for name in hdr}
    out = []
    for r in rows[hdr_i + 1:]:
        if len(r) < len(hdr) or not r[0].startswith("0x"):
            continue
        out.append((int(r[0], 16), r[col["Source"]].strip(),
                    int(r[col["Instructions Executed"]] or 0),
                    int(r[col["Warp Stall Sampling (All Samples)"]] or 0)))
    base = out[0][0]
    return [(a - base, s, i, w) for a, s, i, w in out]


def opcode(text):
    """Mnemonic of a SASS instruction (predicate dropped)."""
    t = text.split()
    if t and t[0].startswith("@"):
        t = t[1:]
    return t[0] if t else ""


def read_sass(path, kernel):
    """offset -> (file, line) for the kernel's section of nvdisasm -g output."""
    where = {}
    inside = False
    cur = ("?", 0)
    for line in open(path):
        if line.startswith("//---------------------") and ".text." in line:
            if inside:
                break
            name = line.split(".text.", 1)[1].split()[0]
            inside = name == kernel or (not kernel.startswith("_Z") and kernel in name)
            continue
        if not inside:
            continue
        m = re.search(r'//## File "([^"]+)", line (\d+)', line)
        if m:
            cur = (m.group(1).split("/")[-1], int(m.group(2)))
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            where[int(m.group(1), 16)] = (cur, opcode(m.group(2)))
    if not where:
        sys.exit(f"no section of {path} names a kernel containing '{kernel}'")
    return where


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("sass")
    ap.add_argument("--kernel", required=True, help="substring of the kernel's mangled name")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    prof = read_csv(a.csv)
    where = read_sass(a.sass, a.kernel)
    inst = collections.Counter()
    samp = collections.Counter()
    missing = differ = 0
    for off, src, i, w in prof:
        hit = where.get(off)
        if hit is None:
            missing += 1
            loc = ("?", 0)
        else:
            loc, op = hit
            differ += op != opcode(src)
        inst[loc] += i
        samp[loc] += w
    ti, ts = sum(inst.values()), sum(samp.values())
    print(f"{len(prof)} SASS rows, {missing} without a line, {differ} with another opcode "
          f"(either nonzero: not the profiled binary); {ti} warp instructions, {ts} stall samples")
    print(f"{'file:line':42s} {'inst %':>7s} {'stall %':>8s}")
    for loc, i in sorted(inst.items(), key=lambda kv: -kv[1])[: a.top]:
        print(f"{loc[0] + ':' + str(loc[1]):42s} {100 * i / max(ti, 1):7.2f} {100 * samp[loc] / max(ts, 1):8.2f}")


if __name__ == "__main__":
    main()

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

nvdisasm -g marks each instruction with its innermost source line (an
inlined helper's own line). nvdisasm -gi prints the inlining chain and then
the outermost line, so its instructions count at the kernel's own lines,
which add up to the whole (docs/perf_notes_delta.md v46); with -gi,
--caller FILE counts them at the outermost line of FILE in the chain (e.g.
which line of a helper header), where the chain passes through FILE.
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


def marker_loc(line, caller):
    """(file, line) of a `//## File` marker: the innermost location of its
    inlining chain, or with `caller` the outermost one in that file (None
    when the chain does not pass through it)."""
    chain = [(f.split("/")[-1], int(n)) for f, n in re.findall(r'"([^"]+)", line (\d+)', line)]
    if not chain:
        return None
    if caller is None:
        return chain[0]
    mine = [c for c in chain if c[0] == caller]
    return mine[-1] if mine else None


def read_sass(path, kernel, caller=None):
    """offset -> (file, line) for the kernel's section of nvdisasm -g / -gi
    output (caller: see marker_loc)."""
    where = {}
    inside = False
    cur = ("?", 0)
    after_chain = False  # the last marker was an inlining chain (-gi)
    for line in open(path):
        if line.startswith("//---------------------") and ".text." in line:
            if inside:
                break
            name = line.split(".text.", 1)[1].split()[0]
            inside = name == kernel or (not kernel.startswith("_Z") and kernel in name)
            continue
        if not inside:
            continue
        if "//## File" in line:
            chain = " inlined at " in line
            if caller is not None and after_chain and not chain:
                continue  # the chain's outermost line, printed after it: placed by the chain
            loc = marker_loc(line, caller)
            cur = loc if loc is not None else (f"(not in {caller})", 0)
            after_chain = chain
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            where[int(m.group(1), 16)] = (cur, opcode(m.group(2)))
            after_chain = False
    if not where:
        sys.exit(f"no section of {path} names a kernel containing '{kernel}'")
    return where


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("sass")
    ap.add_argument("--kernel", required=True, help="substring of the kernel's mangled name")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--caller", help="with nvdisasm -gi output: count each instruction at the outermost "
                    "line of this file (a base name) in its inlining chain")
    a = ap.parse_args()
    prof = read_csv(a.csv)
    where = read_sass(a.sass, a.kernel, a.caller)
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

#!/usr/bin/env python3
"""Per-item timelines of the persistent T = 1 kernel (src/delta/replay1p.cuh).

Reads the dump that R1P_TIMING=file makes the CLI write at exit (the latest
launch: size_t n, then 16 u64 %globaltimer stamps per item) and prints medians
(µs) of each stage over the live items that do not flush.

usage: r1p_timeline.py FILE [--grid 132] [--groups 2]
"""
import argparse
import statistics
import struct
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--grid", type=int, default=132)
    ap.add_argument("--groups", type=int, default=2)
    o = ap.parse_args()
    raw = open(o.file, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    st = [struct.unpack_from("<16Q", raw, 8 + 128 * i) for i in range(n)]
    med = lambda xs: statistics.median(xs) / 1e3 if xs else float("nan")
    stages = {
        "prep: wait for a free buffer (1-0)": (0, 1), "prep: slot (2-1)": (1, 2),
        "prep: cursor, plan (3-2)": (2, 3), "prep: records + token (4-3)": (3, 4),
        "prep: phase 2 (5-4)": (4, 5), "prep: phase 3 (6-5)": (5, 6), "prep: whole (6-1)": (1, 6),
        "cons: ready -> first sweep (9-8)": (8, 9), "cons: item (10-8)": (8, 10),
        "ready after prep start (8 - 1)": (1, 8),
    }
    live = [i for i in range(n) if (st[i][11] >> 32) == 1]
    print(f"{n} items, {len(live)} live without a flush")
    for name, (a, b) in stages.items():
        print(f"{name:40s} {med([st[i][b] - st[i][a] for i in live]):8.2f}")
    idle = [st[i][8] - st[i - o.grid][10] for i in live if i >= o.grid]
    print(f"{'cons: idle before item (8 - prev 10)':40s} {med(idle):8.2f}")
    cyc = [st[i + o.grid * o.groups][0] - st[i][0] for i in live if i + o.grid * o.groups < n]
    print(f"{'group: item to item (0 - 0)':40s} {med(cyc):8.2f}")
    t0 = min(s[0] for s in st if s[0]); t1 = max(s[10] for s in st)
    print(f"{'launch: first stamp to last (µs)':40s} {(t1 - t0) / 1e3:8.2f}")


if __name__ == "__main__":
    sys.exit(main())

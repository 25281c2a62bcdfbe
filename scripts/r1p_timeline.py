#!/usr/bin/env python3
"""Per-item timelines of the persistent T = 1 step (src/delta/replay1p.cuh).

Reads the dump that R1P_TIMING=file makes the CLI write at exit (the latest
launch: size_t n, then 16 u64 %globaltimer stamps per item: 0 the loader
reaches the item, 1 its header is known, 2 its copies are issued, 3 / 4 the
history warp starts / ends its rows (branch t50-hist, perf_notes_delta.md
v53; 0 otherwise), 8 the consumers start it, 9 its first sweep landed, 10
done, 11 SM | flags << 32, 12 / 13 its preparing warp's start / end, 14 its
token prepared, 15 its keys and decays done)
and prints medians (µs) of each stage over the live items that do not
flush, the flushing items' consumer time, and per SM the items, flushes and
end time (from the launch's first stamp).

usage: r1p_timeline.py FILE
"""
import argparse
import collections
import statistics
import struct
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    o = ap.parse_args()
    raw = open(o.file, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    st = [struct.unpack_from("<16Q", raw, 8 + 128 * i) for i in range(n)]
    med = lambda xs: statistics.median(xs) / 1e3 if xs else float("nan")
    flags = lambda i: st[i][11] >> 32
    live = [i for i in range(n) if flags(i) == 1 and st[i][10]]
    fl = [i for i in range(n) if flags(i) == 3 and st[i][10]]
    print(f"{n} items, {len(live)} live without a flush, {len(fl)} flushing")
    stages = {
        "loader: header known (1-0)": (0, 1), "loader: copies issued (2-1)": (1, 2),
        "cons: start after issue (8-2)": (2, 8), "cons: start -> first sweep (9-8)": (8, 9),
        "cons: item (10-8)": (8, 10),
    }
    if any(st[i][4] for i in live):
        stages.update({"hist: start after issue (3-2)": (2, 3), "hist: rows (4-3)": (3, 4),
                       "hist: done before cons start (8-4)": (4, 8)})
    for name, (a, b) in stages.items():
        print(f"{name:40s} {med([st[i][b] - st[i][a] for i in live]):8.2f}")
    print(f"{'cons: flushing item (10-8)':40s} {med([st[i][10] - st[i][8] for i in fl]):8.2f}")
    p0 = min(s[12] for s in st if s[12])
    p1 = max(s[13] for s in st)
    print(f"{'prep: first start to last end (µs)':40s} {(p1 - p0) / 1e3:8.2f}")
    for name, (a, b) in {"prep: warp (13-12)": (12, 13), "prep: slot .. token (14-12)": (12, 14),
                         "prep: keys, decays (15-14)": (14, 15), "prep: phase 3 (13-15)": (15, 13)}.items():
        print(f"{name:40s} {med([st[i][b] - st[i][a] for i in live]):8.2f}")
    t0 = min(s[0] for s in st if s[0])
    print(f"{'stream: first stamp after prep end (µs)':40s} {(t0 - p1) / 1e3:8.2f}")
    per = collections.defaultdict(lambda: [0, 0, 0])
    for i in range(n):
        if not st[i][10]:
            continue
        p = per[st[i][11] & 0xffffffff]
        p[0] += 1
        p[1] += flags(i) == 3
        p[2] = max(p[2], st[i][10] - t0)
    ends = sorted(v[2] / 1e3 for v in per.values())
    if ends:
        print(f"{'SM end: min / median / max (µs)':40s} {ends[0]:8.2f} {statistics.median(ends):8.2f} {ends[-1]:8.2f}")
        its = [v[0] for v in per.values()]
        fls = [v[1] for v in per.values()]
        print(f"{'items per SM: min / max':40s} {min(its):8d} {max(its):8d}")
        print(f"{'flushing items per SM: min / max':40s} {min(fls):8d} {max(fls):8d}")
    t1 = max(s[10] for s in st)
    print(f"{'launch: first stamp to last (µs)':40s} {(t1 - t0) / 1e3:8.2f}")


if __name__ == "__main__":
    sys.exit(main())

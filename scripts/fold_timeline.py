#!/usr/bin/env python3
"""Per-block timelines of the dual fold (src/delta/dual_fold_mma.cuh).

Reads the dump that FOLD_TIMING=file makes the CLI write at exit (the latest
fold launch: size_t n, then 16 u64 %globaltimer stamps per block: 0 start,
1 plan known, 2 + i head i done (i < 8), 10–13 the first head's records
loaded, weights made, warp 0's tile folded and packed, 14 end, 15 SM |
folds << 32; with at most 4 heads per block 6 is warp 0's products and
solve of the first head and 7–9 the second head's records, weights and
warp 0's products and solve) and prints
when blocks started and ended (µs from the launch's first stamp), the
folding blocks' time per head, and when the last block started (the
programmatic dependent may launch only after it). With --r1p FILE (an
R1P_TIMING dump of the same launch sequence) also when the persistent
step's preparation started and ended on the same clock.

usage: fold_timeline.py FILE [--r1p FILE]
"""
import argparse
import statistics
import struct


def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", raw, 0)
    return [struct.unpack_from("<16Q", raw, 8 + 128 * i) for i in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--r1p")
    o = ap.parse_args()
    st = [s for s in load(o.file) if s[0]]
    t0 = min(s[0] for s in st)
    us = lambda t: (t - t0) / 1e3
    med = lambda xs: statistics.median(xs) if xs else float("nan")
    fold = [s for s in st if s[15] >> 32]
    idle = [s for s in st if not s[15] >> 32]
    print(f"{len(st)} blocks, {len(fold)} folding, {len(idle)} reading a cursor only")
    print(f"{'last block start (µs)':40s} {us(max(s[0] for s in st)):8.2f}")
    print(f"{'last idle block end (µs)':40s} {us(max((s[14] for s in idle), default=t0)):8.2f}")
    print(f"{'idle block: start -> end (µs, median)':40s} {med([(s[14] - s[0]) / 1e3 for s in idle]):8.2f}")
    if fold:
        print(f"{'folding: first / last start (µs)':40s} {us(min(s[0] for s in fold)):8.2f} {us(max(s[0] for s in fold)):8.2f}")
        print(f"{'folding: last end (µs)':40s} {us(max(s[14] for s in fold)):8.2f}")
        print(f"{'folding: start -> plan (µs, median)':40s} {med([(s[1] - s[0]) / 1e3 for s in fold]):8.2f}")
        heads = []
        for name, (x, y) in {"first head: records (10-1)": (1, 10), "first head: W, F, M (11-10)": (10, 11),
                             "first head: warp 0 tile (12-11)": (11, 12), "first head: warp 0 pack (13-12)": (12, 13),
                             "first head: block barrier (2-13)": (13, 2)}.items():
            print(f"{name:40s} {med([(s[y] - s[x]) / 1e3 for s in fold if s[x] and s[y]]):8.2f}")
        # at most 4 heads per block: slot 6 is warp 0's products and solve of
        # the first head, 7-9 the second head's records, weights, products and solve
        phased = lambda s: s[6] and s[6] < s[2]
        few = [s for s in fold if phased(s)]
        if few:
            for name, (x, y) in {"first head: warp 0 P + solve (6-11)": (11, 6),
                                 "second head: records (7-2)": (2, 7), "second head: W, F, M (8-7)": (7, 8),
                                 "second head: warp 0 P + solve (9-8)": (8, 9),
                                 "second head: rest to its end (3-9)": (9, 3)}.items():
                print(f"{name:40s} {med([(s[y] - s[x]) / 1e3 for s in few if s[x] and s[y]]):8.2f}")
        for s in fold:
            prev = s[1]
            for i in range(2, 6 if phased(s) else 10):
                if not s[i]:
                    break
                heads.append((s[i] - prev) / 1e3)
                prev = s[i]
        q = sorted(heads)
        print(f"{'folding: per head (µs) median / p10 / p90':40s} {med(heads):8.2f} {q[len(q) // 10]:8.2f} {q[9 * len(q) // 10]:8.2f}")
        print(f"{'folding: block (µs, median)':40s} {med([(s[14] - s[0]) / 1e3 for s in fold]):8.2f}")
        # concurrency: folding blocks resident over time
        ev = sorted([(s[0], 1) for s in fold] + [(s[14], -1) for s in fold])
        cur = peak = 0
        for _, d in ev:
            cur += d
            peak = max(peak, cur)
        print(f"{'folding: peak resident blocks':40s} {peak:8d}")
    if o.r1p:
        it = load(o.r1p)
        p0 = min(s[12] for s in it if s[12])
        p1 = max(s[13] for s in it)
        e1 = max(s[10] for s in it)
        print(f"{'prep: first start / last end (µs)':40s} {us(p0):8.2f} {us(p1):8.2f}")
        print(f"{'stream: last item done (µs)':40s} {us(e1):8.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Per-block timeline of the T = 1 delta replay kernel (replay1.cuh).

Reads the file a REPLAYSSM_R1_TIMING build writes at exit (R1_TIMING=path:
a uint64 block count, then 16 uint64 per block for the latest T = 1 replay
launch) and prints medians per phase. Build and run:

    cmake -S . -B build-t -G Ninja -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON \\
        -DREPLAYSSM_TESTS=OFF -DCMAKE_CUDA_FLAGS=-DREPLAYSSM_R1_TIMING
    ninja -C build-t replayssm_cli
    R1_TIMING=/tmp/t.bin build-t/replayssm bench --backend cuda --family gdn \\
        --preset gdn/H16-HV64 --batch 256 --L 16 --state fp32 --modes replay --target-ms 2
    python3 scripts/r1_timeline.py /tmp/t.bin "gdn fp32 B=256"

Stamps (%globaltimer, ns): 0 block start, 1 slot read, 2 plan (cursor read
and checked), 3 phase-1 barrier passed, 4 phases 2-3 done, 5 first sweep
landed, 6 last sweep done (thread 0 of the bulk streams); 7 the SM and the
plan (bit 32: flush, bits 33+: records read or folded); phase-1 detail:
8 / 9 warp 0 before / after its q̂, k̂ preparation, 10 after appending k,
11 thread 32 after issuing β, 12 after β and the gates, 13 thread 224 (last
warp) before its record stores, 14 / 15 threads 0 / 64 at the phase-1 barrier.
"""
import struct
import sys

import numpy as np


def main() -> None:
    path, label = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1]
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    a = np.frombuffer(raw[8:8 + n * 128], dtype=np.uint64).reshape(n, 16).astype(np.int64)
    ok = (a[:, 0] > 0) & (a[:, 6] > 0)  # bulk-stream blocks that ran to the end
    a = a[ok]
    sm = a[:, 7] & 0xFFFFFFFF
    flush = (a[:, 7] >> 32) & 1
    nold = a[:, 7] >> 33
    t = (a[:, :7] - a[:, 0].min()) / 1000.0  # µs since the launch's first block
    span = t[:, 6].max()
    seg = np.diff(t, axis=1)
    names = ["slot", "plan", "ph1", "ph23", "wait1", "sweeps"]
    print(f"== {label}: {ok.sum()} of {n} blocks stamped, span {span:.1f} µs, flush share {flush.mean():.3f}")
    for fl in (0, 1):
        m = flush == fl
        if not m.any():
            continue
        med = np.median(seg[m], axis=0)
        tot = t[m, 6] - t[m, 0]
        print(f"  flush={fl} n={m.sum()}: " + " ".join(f"{k} {v:.2f}" for k, v in zip(names, med))
              + f" | total {np.median(tot):.2f} | p10/p90 total {np.percentile(tot, 10):.2f}/{np.percentile(tot, 90):.2f}")
    m = flush == 0
    if m.any():
        detail = ["w0 prep start", "w0 q/k ready", "w0 k stored", "w1 beta issued", "w1 beta+gates done",
                  "last warp before stores", "t0 at barrier", "w2 at barrier"]
        ext = a[m, 8:16]
        rel = (ext - a[m, 2][:, None]) / 1000.0
        print("  phase 1 (µs after the plan): "
              + "; ".join(f"{k} {np.median(rel[:, i]):.2f}" for i, k in enumerate(detail) if (ext[:, i] > 0).all()))
        hist = []
        for h in sorted(set(nold[m].tolist())):
            mm = m & (nold == h)
            hist.append(f"{h}:{np.median(t[mm, 4] - t[mm, 0]):.1f}/{np.median(t[mm, 6] - t[mm, 0]):.1f}")
        print("  by records read (to phase 3 end / total): " + " ".join(hist))
    nsm = int(sm.max()) + 1
    print(f"  resident blocks per SM (avg) {(t[:, 6] - t[:, 0]).sum() / (span * nsm):.2f}; "
          f"blocks in sweeps per SM (avg) {(t[:, 6] - t[:, 5]).sum() / (span * nsm):.2f}")
    edges = np.linspace(0, span, 11)
    cols = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        def occ(s0, s1):
            return np.clip(np.minimum(s1, hi) - np.maximum(s0, lo), 0, None).sum() / ((hi - lo) * nsm)
        cols.append(f"{occ(t[:, 0], t[:, 5]):.2f}/{occ(t[:, 5], t[:, 6]):.2f}")
    print("  per tenth of the span, blocks per SM in prologue/sweeps: " + " ".join(cols))


if __name__ == "__main__":
    main()

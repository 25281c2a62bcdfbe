#!/usr/bin/env python3
"""Plot benchmark JSON Lines: µs/step vs batch, baseline vs replay, one panel per
(family, shape). Needs matplotlib; without it, prints a message and exits 0.

  python3 scripts/plot_bench.py bench/results/RUN.jsonl [more.jsonl ...]
      [--out bench.png] [--L 16] [--T 1] [--state fp32,bf16] [--family gdn]

Each panel has one line per (mode, state dtype, read format) at the chosen L
(baseline and shared rows have no L), log-log axes, and the bandwidth floor (modelled bytes / copy
bandwidth) of the replay rows as a dotted line.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import KEY, load  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default="bench.png")
    ap.add_argument("--L", type=int, default=16)
    ap.add_argument("--state", default=None, help="comma list of state dtypes (default: all)")
    ap.add_argument("--family", default=None)
    ap.add_argument("--T", type=int, default=1, help="tokens per row of the plotted rows (default 1)")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_bench.py: matplotlib is not installed; no plot written "
              "(pip install matplotlib, or use scripts/bench_table.py)")
        return 0

    states = None if a.state is None else set(a.state.split(","))
    fams = None if a.family is None else set(a.family.split(","))
    last = {}
    for r in load(a.files):
        if states is not None and r.get("state_dtype") not in states:
            continue
        if fams is not None and r.get("family") not in fams:
            continue
        if r.get("T", 1) != a.T:
            continue
        if r.get("mode") not in ("baseline", "snapshot_spec", "shared") and r.get("L") != a.L:
            continue
        last[tuple(r.get(k) for k in KEY)] = r
    rows = list(last.values())
    if not rows:
        print("plot_bench.py: no rows match", file=sys.stderr)
        return 1

    panels = sorted({(r["family"], r["shape"]) for r in rows})
    cols = min(4, len(panels))
    nrows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False)
    styles = {"baseline": "-o", "replay": "-s"}
    for ax, (family, shape) in zip(axes.flat, panels):
        sel = [r for r in rows if r["family"] == family and r["shape"] == shape]
        for mode, state, read in sorted({(r["mode"], r["state_dtype"], r.get("read_dtype", r["state_dtype"]))
                                         for r in sel}):
            pts = sorted((r["batch"], r["us_per_step"], r.get("floor_us")) for r in sel
                         if r["mode"] == mode and r["state_dtype"] == state
                         and r.get("read_dtype", state) == read)
            label = f"{mode} {state}" + (f" reads {read}" if read != state else "") + \
                (f" L={a.L}" if mode not in ("baseline", "snapshot_spec", "shared") else "")
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], styles.get(mode, "-^"),
                            label=label, markersize=4)
            if mode in ("replay", "replay_spec") and all(p[2] for p in pts):
                ax.plot([p[0] for p in pts], [p[2] for p in pts], ":", color=line.get_color(),
                        label=f"floor {state}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{family} {shape}", fontsize=9)
        ax.set_xlabel("batch")
        ax.set_ylabel("µs / step")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    devices = sorted({str(r.get("device")) for r in rows})
    what = "decode step time" if a.T == 1 else f"speculative step time, T = {a.T}"
    fig.suptitle(f"{what}, {', '.join(devices)} (median of CUDA graph replays)", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=130)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

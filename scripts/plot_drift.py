#!/usr/bin/env python3
"""Plot the CSV of `replayssm drift`: output relative error vs decode position
(log-log, mean per log2 bin), one panel per family, one line per precision arm.
Needs matplotlib; without it, prints a message and exits 0.

  python3 scripts/plot_drift.py drift.csv [--out drift.png]

Line styles: fp32 arms black, shared arms dashed (stochastic rounding dotted),
dual arms solid; one colour per read format. The legend carries the fitted
growth exponent (slope of log error over log position, from the CSV). An arm
that diverges (error > 30) runs off the clipped y axis.
"""
import argparse
import csv
import math
from collections import OrderedDict

COLOURS = {"bf16": "tab:blue", "f16": "tab:green", "fp8": "tab:orange", "nvfp4": "tab:red"}


def style(arm):
    if arm.startswith("fp32"):
        return dict(color="black", linestyle="-" if arm.endswith("step") else "--", linewidth=1.2)
    fmt = arm.split("_")[-2] if arm.endswith("_sr") else arm.split("_")[-1]
    colour = COLOURS.get(fmt, "gray")
    if arm.startswith("shared"):
        return dict(color=colour, linestyle=":" if arm.endswith("_sr") else "--", linewidth=1.2)
    return dict(color=colour, linestyle="-", linewidth=2.0 if "fp16" not in arm else 1.0,
                marker="o" if "fp16" in arm else None, markersize=3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--out", default="drift.png")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_drift.py: matplotlib is not installed; nothing plotted")
        return 0
    data = OrderedDict()
    with open(a.csv) as f:
        for r in csv.DictReader(f):
            fam = data.setdefault(r["family"], OrderedDict())
            arm = fam.setdefault(r["arm"], {"x": [], "y": [], "exp": float(r["exponent"])})
            lo, hi = int(r["bin_lo"]), int(r["bin_hi"])
            arm["x"].append(math.sqrt(lo * max(hi - 1, lo)))
            arm["y"].append(float(r["mean_rel_err"]))
    fig, axes = plt.subplots(1, len(data), figsize=(6 * len(data), 5), squeeze=False)
    for ax, (fam, arms) in zip(axes[0], data.items()):
        for arm, d in arms.items():
            ax.plot(d["x"], d["y"], label=f"{arm} ({d['exp']:+.2f})", **style(arm))
        ax.set_xscale("log")
        ax.set_yscale("log")
        top = max(max(d["y"]) for d in arms.values())
        if top > 30:  # a diverging arm: clip the axis so the others stay readable
            ax.set_ylim(top=30)
            ax.text(0.02, 0.98, "axis clipped at 30", transform=ax.transAxes, fontsize=7, va="top")
        ax.set_title(fam)
        ax.set_xlabel("decode position (log2 bins)")
        ax.set_ylabel("output relative error vs fp64")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.suptitle("replayssm drift: dual (solid) vs shared (dashed; SR dotted) vs fp32 (black)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

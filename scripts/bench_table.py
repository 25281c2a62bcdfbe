#!/usr/bin/env python3
"""Benchmark JSON Lines (design/replay.md section 7) -> markdown tables.

One table per (family, shape); one row per (batch, state dtype, read format, mode, L),
baseline first, with the speed-up over the baseline measured in the same run
and the fraction of copy bandwidth achieved.

  python3 scripts/bench_table.py bench/results/RUN.jsonl [more.jsonl ...]
      [--batch 256] [--L 16] [--family gdn] [--state fp32] [--mode replay]
      [--all-rows]

Rows repeated under the same key (e.g. a quick and a full run in one file)
keep the last one unless --all-rows is given.
"""
import argparse
import json
import sys
from collections import OrderedDict

KEY = ("family", "shape", "batch", "state_dtype", "read_dtype", "record_dtype", "act_dtype", "L",
       "T", "mode", "flush_layout")
MODE_ORDER = {"baseline": 0, "snapshot_spec": 1, "replay": 2, "replay_spec": 3, "dual": 4, "dual_spec": 5,
              "shared": 6}


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    print(f"{path}:{n}: skipped ({e})", file=sys.stderr)
    return rows


def csv_filter(values, cast=str):
    return None if values is None else {cast(v) for v in values.split(",")}


def baseline_key(r):
    return (r.get("family"), r.get("shape"), r.get("batch"), r.get("state_dtype"), r.get("act_dtype"),
            r.get("T", 1), r.get("device"))


BASE_MODES = ("baseline", "snapshot_spec")


def is_base(r):
    return r.get("mode") in BASE_MODES


def fmt(v, spec, dash="-"):
    return dash if v is None else format(v, spec)


def speedup(r, baselines):
    """Baseline time / this row's time, from the same run's baseline row."""
    if is_base(r):
        return None
    if r.get("speedup"):
        return r["speedup"]
    b = baselines.get(baseline_key(r))
    return b["us_per_step"] / r["us_per_step"] if b and r.get("us_per_step") else None


def render(rows, out):
    baselines = {baseline_key(r): r for r in rows if is_base(r)}
    groups = OrderedDict()
    for r in sorted(rows, key=lambda r: (r.get("family", ""), r.get("shape", ""))):
        groups.setdefault((r.get("family"), r.get("shape")), []).append(r)
    devices = sorted({(r.get("device"), r.get("copy_gbps")) for r in rows}, key=str)
    for dev, gbps in devices:
        out.write(f"Device: {dev}; copy bandwidth {fmt(gbps, '.0f')} GB/s (read + write, same run).\n")
    commits = sorted({r.get("commit", "unknown") for r in rows})
    out.write(f"Commit: {', '.join(commits)}.\n\n")
    for (family, shape), rs in groups.items():
        out.write(f"### {family} {shape}\n\n")
        out.write("| B | state | mode | L | T | accepted | records | µs/step | floor µs | GB/s | % of copy | speed-up | "
                  "model | flush share | MB/row |\n")
        out.write("|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        rs.sort(key=lambda r: (r.get("batch", 0), r.get("state_dtype", ""),
                               MODE_ORDER.get(r.get("mode"), 9), r.get("L", 0)))
        for r in rs:
            us = r.get("us_per_step")
            bytes_ = r.get("bytes_per_step")
            gbs = bytes_ / (us * 1e3) if us and bytes_ else None
            floor = r.get("floor_us")
            if floor is None and bytes_ and r.get("copy_gbps"):
                floor = bytes_ / (r["copy_gbps"] * 1e3)
            sp = speedup(r, baselines)
            model = r.get("model_speedup") if not is_base(r) else None
            flush = r.get("flush_share") if not is_base(r) else None
            T = r.get("T", 1)
            acc = r.get("accept_mean") if T and T > 1 else None
            records = r.get("records") or r.get("record_dtype", "")
            mem = r.get("mem_bytes_per_row")
            frac = r.get("frac_of_copy")
            state = r.get("state_dtype")
            if r.get("read_dtype") not in (None, state):
                state = f"{state}, reads {r['read_dtype']}"
            out.write(f"| {r.get('batch')} | {state} | {r.get('mode')} | "
                      f"{r.get('L') or '-'} | {T} | {fmt(acc, '.2f')} | {records if records != 'none' else '-'} | {fmt(us, '.2f')} | "
                      f"{fmt(floor, '.2f')} | {fmt(gbs, '.0f')} | "
                      f"{fmt(None if frac is None else 100 * frac, '.1f')} | "
                      f"{fmt(sp, '.2f')}{'×' if sp else ''} | {fmt(model, '.2f')}{'×' if model else ''} | "
                      f"{fmt(flush, '.3f')} | {fmt(None if mem is None else mem / 1e6, '.2f')} |\n")
        out.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--batch")
    ap.add_argument("--L")
    ap.add_argument("--family")
    ap.add_argument("--state")
    ap.add_argument("--mode")
    ap.add_argument("--all-rows", action="store_true", help="keep repeated rows")
    a = ap.parse_args()
    rows = load(a.files)
    batch, Ls = csv_filter(a.batch, int), csv_filter(a.L, int)
    fams, states, modes = csv_filter(a.family), csv_filter(a.state), csv_filter(a.mode)

    def keep(r):
        # Baseline rows (L = 0) stay when filtering by L: replay rows need them.
        return ((batch is None or r.get("batch") in batch)
                and (Ls is None or is_base(r) or r.get("L") in Ls)
                and (fams is None or r.get("family") in fams)
                and (states is None or r.get("state_dtype") in states)
                and (modes is None or r.get("mode") in modes or is_base(r)))

    rows = [r for r in rows if keep(r)]
    if not a.all_rows:
        last = OrderedDict()
        for r in rows:
            last[tuple(r.get(k) for k in KEY)] = r
        rows = list(last.values())
    if not rows:
        print("no rows", file=sys.stderr)
        return 1
    render(rows, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

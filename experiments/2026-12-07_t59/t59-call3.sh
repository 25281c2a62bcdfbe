#!/bin/bash
# t59, device call 3 (~150 s; carry gpubin-x/t59.tar.xz, main at ae4f02f):
# where a dual step's time goes, kernel by kernel (ncu serializes them, so
# the programmatic overlap of the fold and the stream is lost; each
# kernel's own duration, instructions and DRAM bytes). GDN HV64, KDA and
# Mamba-2 H128, fp32 checkpoint, fp8 and nvfp4 copies, B = 256, L = 16.
# Files: ncu_<row>.csv (raw per launch), log.txt (per-kernel summary).
#   run: bash experiments/2026-12-07_t59/t59-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc "${PACK:-gpubin-x/t59.tar.xz}" | tar -C "$d" -x
b=$(head -1 "$d/BUILDS")
M=$d/$b/replayssm
MET=gpu__time_duration.sum,sm__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active
prof() {  # row, bench args
  local r=$1; shift
  timeout 100 ncu --clock-control none --metrics $MET --launch-skip ${SKIP:-60} --launch-count ${COUNT:-16} --csv --page raw \
    $M bench --backend cuda --L 16 --batch 256 --target-ms 1 --state fp32 "$@" > "$OUT/ncu_$r.csv" 2> "$d/err_$r.txt"
  echo "== $r rc=$?" | tee -a "$OUT/log.txt"
  python3 - "$OUT/ncu_$r.csv" <<'PY' | tee -a "$OUT/log.txt"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
i = next(k for k, r in enumerate(rows) if "Kernel Name" in r)
h = rows[i]; data = [r for r in rows[i + 2:] if len(r) == len(h)]
col = {n: h.index(n) for n in h}
agg = collections.OrderedDict()
for r in data:
    name = r[col["Kernel Name"]].split("(")[0].split("<")[0][-40:]
    a = agg.setdefault(name, [0, 0.0, 0.0, 0.0, 0.0, r[col["launch__registers_per_thread"]], r[col["launch__grid_size"]], r[col["launch__block_size"]]])
    f = lambda n: float(r[col[n]].replace(",", "") or 0)
    a[0] += 1; a[1] += f("gpu__time_duration.sum"); a[2] += f("sm__inst_executed.sum")
    a[3] += f("dram__bytes_read.sum"); a[4] += f("dram__bytes_write.sum")
print(f"{'kernel':40s} {'n':>3s} {'us/launch':>10s} {'Minstr':>8s} {'MB rd':>8s} {'MB wr':>8s} regs grid block")
for k, a in agg.items():
    n = a[0]
    print(f"{k:40s} {n:3d} {a[1]/n/1e3:10.1f} {a[2]/n/1e6:8.2f} {a[3]/n/1e6:8.1f} {a[4]/n/1e6:8.1f} {a[5]} {a[6]} {a[7]}")
PY
}
prof gdn_fp8 --family gdn --preset qwen35-122b --modes dual --read fp8
prof gdn_nvfp4 --family gdn --preset qwen35-122b --modes dual --read nvfp4
prof kda_nvfp4 --family kda --preset kimi --modes dual --read nvfp4
prof m2_fp8 --family mamba2 --preset nemotron3 --modes dual --read fp8
prof m2_nvfp4 --family mamba2 --preset nemotron3 --modes dual --read nvfp4

#!/bin/bash
# t55, device call 6 (not yet run; carry gpubin-x/t55s.tar.xz: `main` = main's
# build at b6b96ac's code (REC16 in the one KDA tensor-core instance; the
# pack's binaries are t53r's `rec`), `split` = branch t55-rec16-split (REC16
# in an instance of its own, R16, so the loads' path compiles without it;
# fp32 states: the second half of each warp's tile prefetched into L2 when
# its first half is requested, the first tile's before the preparation,
# REPLAYSSM_SPEC_HALF_PF).
# First split's speculative delta tests (8 shards) and memcheck / racecheck
# on the equality test (REC16 on and off), then KDA rows: main, split and
# split with REPLAYSSM_SPEC_REC16=0 (`split0`), builds alternating, two
# rounds: fp32 T = 5 at B = 64 / 256 / 512, L = 32 (REC16 does not fit),
# bf16 states, and T = 8 in round 1; and at fp32 T = 5 split with the
# block-ahead record prefetch off (REPLAYSSM_SPEC_REC_PF=0, `splitpf0`) and
# with the half-tile prefetch off (REPLAYSSM_SPEC_HALF_PF=0, `splithpf0`);
# GDN fp32 T = 5: main, split, and split with the half-tile prefetch on
# (REPLAYSSM_SPEC_HALF_PF=1, `splitgh1`; off by default for GDN). ~480 s.
# To remake the pack: xz -dc gpubin-x/t53r.tar.xz | tar -C /tmp/p -x (its
# `rec` is main's code), build the branch (cmake -S . -B DIR -G Ninja
# -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON && ninja -C DIR), then
# DEST=gpubin-x/t55s.tar.xz bash scripts/pack_builds.sh main=/tmp/p/rec split=DIR
#   run: bash experiments/2026-12-06_t55/t55-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t55s.tar.xz | tar -C "$d" -x
S=$d/split
F='DeltaGpu.Spec*:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpec*:Part/DeltaGpuSpeculative*:DeltaGpuArena.SpeculativeWindows:DeltaGpuArena.PaddedRows:DeltaGpuArena.MisalignedRowsRejected:Part/DualDeltaGpuSpeculativeWindows*:Part/DualDeltaGpuArena*'
bash scripts/gpu_shard_tests.sh "$S/replayssm_gpu_tests" "$F" "$OUT/tests" 8 170 > "$OUT/shards.txt" 2>&1
grep -h "PASSED\|FAILED\|tests from.*ran\|no PASSED" "$OUT/shards.txt" | sort | uniq -c
for tool in memcheck racecheck; do
  timeout 100 compute-sanitizer --tool $tool --kernel-name kns=delta_replay --launch-skip 4 --launch-count 8 \
    "$S/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DeltaGpu.SpecRecordsByCopiesMatchLoads' > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"
  tail -n 2 "$OUT/$tool.txt"
done
A="--backend cuda --target-ms 2 --modes replay --T 5"
KA="$A --family kda --preset kimi" GA="$A --family gdn --preset qwen35-122b"
for r in 1 2; do
  for b in main split split0 splitpf0 splithpf0 splitgh1; do
    bin=$d/split/replayssm
    [[ $b == main ]] && bin=$d/main/replayssm
    # the rows' `commit`: the code each build was made from (the device's
    # own tree would report the branch head)
    export REPLAYSSM_COMMIT=94c142b
    [[ $b == main ]] && REPLAYSSM_COMMIT=c97a465
    unset REPLAYSSM_SPEC_REC16 REPLAYSSM_SPEC_REC_PF REPLAYSSM_SPEC_HALF_PF
    case $b in
      split0) export REPLAYSSM_SPEC_REC16=0 ;;
      splitpf0) export REPLAYSSM_SPEC_REC_PF=0 ;;
      splithpf0) export REPLAYSSM_SPEC_HALF_PF=0 ;;
      splitgh1) export REPLAYSSM_SPEC_HALF_PF=1 ;;
    esac
    run() {  # part, timeout, bench arguments
      local part=$1 t=$2; shift 2
      timeout $t $bin bench "$@" --out $OUT/r${r}_${b}_$part.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
    }
    # a: KDA fp32 T = 5 (every variant but splitgh1)
    [[ $b != splitgh1 ]] && run a 60 $KA --L 16 --batch 64,256,512 --state fp32
    # e: GDN fp32 T = 5 (main, split, splitgh1: the half-tile prefetch on GDN)
    [[ $b == main || $b == split || $b == splitgh1 ]] && run e 60 $GA --L 16 --batch 64,256,512 --state fp32
    [[ $b == main || $b == split || $b == split0 ]] || continue
    run b 40 $KA --L 32 --batch 256 --state fp32
    run c 40 $KA --L 16 --batch 256 --state bf16
    [[ $r == 1 ]] && run d 40 ${KA/--T 5/--T 8} --L 16 --batch 256 --state fp32
  done
done
unset REPLAYSSM_SPEC_REC16 REPLAYSSM_SPEC_REC_PF REPLAYSSM_SPEC_HALF_PF
# rows stay one file per round, build and part (r<round>_<build>_<a-e>.jsonl)

#!/bin/bash
# t56, device call 1 (carry gpubin-x/t56.tar.xz: `main` = main's build
# (c97a465's code, REC16 in the one KDA tensor-core instance; t53r's `rec`),
# `a3` = branch t56-kda3: t55-rec16-split's code (REC16's own instance R16,
# the fp32 half-tile L2 prefetch REPLAYSSM_SPEC_HALF_PF) plus A3, KDA's fp32
# tensor-core kernel at three blocks per SM with its stages over the
# preparation's arrays (REPLAYSSM_SPEC_A3=1; off by default). With A3 off
# the a3 build's kernels are t55-rec16-split's (scripts/sass_same.py), so
# `split*` rows are that branch.
# First the a3 build's speculative delta tests (8 shards, the new
# SpecThreeBlocks* among them) and memcheck / racecheck on
# SpecThreeBlocksMatch, then rows, builds alternating, two rounds:
#   a: KDA fp32 T = 5, B = 64 / 256 / 512: main, split, split0 (REC16 off),
#      splithpf0 (half-tile prefetch off), a3, a3r0 (A3 without REC16);
#      splitpf0 (block-ahead record prefetch off) in round 1
#   d: KDA fp32 T = 8, B = 256: main, split, a3 (round 1)
#   b: KDA fp32 L = 32 (A3 and REC16 do not fit), c: KDA bf16: main, split (round 1)
#   e: GDN fp32 T = 5, B = 64 / 256 / 512: main, split, splitgh1 (half-tile prefetch on)
# Rows: r<round>_<variant>_<part>.jsonl, `commit` set per build. ~500 s.
# Shorter (less device time left): ROUNDS="1" and / or VARIANTS="main split a3";
# SKIP_SAN=1 skips the sanitizers. PACK=gpubin-x/t57.tar.xz A3C=8861ec0: t57's pack (a3 = 8861ec0).
# SHORT=1 (t57-call1): only A3's and REC16's byte-for-byte tests, one shard,
# and only the KDA fp32 parts a and d.
# To remake the pack: xz -dc gpubin-x/t53r.tar.xz | tar -C /tmp/p -x (its
# `rec` is main's code), build the branch (cmake -S . -B DIR -G Ninja
# -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON && ninja -C DIR), then
# DEST=gpubin-x/t56.tar.xz bash scripts/pack_builds.sh main=/tmp/p/rec a3=DIR
#   run: bash experiments/2026-12-07_t56/t56-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc "${PACK:-gpubin-x/t56.tar.xz}" | tar -C "$d" -x
X=$d/a3
A3C=${A3C:-4859205}  # the a3 build's commit, for the rows
shards=8 F='DeltaGpu.Spec*:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpec*:Part/DeltaGpuSpeculative*:DeltaGpuArena.SpeculativeWindows:DeltaGpuArena.PaddedRows:DeltaGpuArena.MisalignedRowsRejected:Part/DualDeltaGpuSpeculativeWindows*:Part/DualDeltaGpuArena*'
short=${SHORT:-0}
[[ $short == 1 ]] && shards=1 F='DeltaGpu.SpecThreeBlocks*:DeltaGpu.SpecRecordsByCopies*'
bash scripts/gpu_shard_tests.sh "$X/replayssm_gpu_tests" "$F" "$OUT/tests" $shards 170 > "$OUT/shards.txt" 2>&1
tar -xOzf "$OUT/tests/tests.tgz" 2>/dev/null | grep -h "PASSED\|FAILED\|tests from.*ran\|no PASSED" | sort | uniq -c
grep "no PASSED\|rc=" "$OUT/shards.txt"
for tool in $([[ ${SKIP_SAN:-0} == 1 ]] || echo memcheck racecheck); do
  timeout 100 compute-sanitizer --tool $tool --kernel-name kns=delta_replay --launch-skip 4 --launch-count 8 \
    "$X/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DeltaGpu.SpecThreeBlocksMatch' > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"
  tail -n 2 "$OUT/$tool.txt"
done
A="--backend cuda --target-ms 2 --modes replay --T 5"
KA="$A --family kda --preset kimi" GA="$A --family gdn --preset qwen35-122b"
for r in ${ROUNDS:-1 2}; do
  for b in ${VARIANTS:-main split a3 split0 a3r0 splithpf0 splitpf0 splitgh1}; do
    bin=$X/replayssm
    export REPLAYSSM_COMMIT=$A3C
    [[ $b == main ]] && bin=$d/main/replayssm && REPLAYSSM_COMMIT=c97a465
    unset REPLAYSSM_SPEC_REC16 REPLAYSSM_SPEC_REC_PF REPLAYSSM_SPEC_HALF_PF REPLAYSSM_SPEC_A3
    case $b in
      a3) export REPLAYSSM_SPEC_A3=1 ;;
      a3r0) export REPLAYSSM_SPEC_A3=1 REPLAYSSM_SPEC_REC16=0 ;;
      split0) export REPLAYSSM_SPEC_REC16=0 ;;
      splitpf0) export REPLAYSSM_SPEC_REC_PF=0 ;;
      splithpf0) export REPLAYSSM_SPEC_HALF_PF=0 ;;
      splitgh1) export REPLAYSSM_SPEC_HALF_PF=1 ;;
    esac
    run() {  # part, timeout, bench arguments
      local part=$1 t=$2; shift 2
      timeout $t $bin bench "$@" --out $OUT/r${r}_${b}_$part.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
    }
    [[ $b == splitpf0 && $r == 2 ]] && continue
    [[ $b != splitgh1 ]] && run a 60 $KA --L 16 --batch 64,256,512 --state fp32
    [[ $short != 1 ]] && [[ $b == main || $b == split || $b == splitgh1 ]] && run e 60 $GA --L 16 --batch 64,256,512 --state fp32
    [[ $r == 1 ]] || continue
    [[ $b == main || $b == split || $b == a3 ]] && run d 40 ${KA/--T 5/--T 8} --L 16 --batch 256 --state fp32
    [[ $short != 1 ]] && [[ $b == main || $b == split ]] || continue
    run b 40 $KA --L 32 --batch 256 --state fp32
    run c 40 $KA --L 16 --batch 256 --state bf16
  done
done
unset REPLAYSSM_SPEC_REC16 REPLAYSSM_SPEC_REC_PF REPLAYSSM_SPEC_HALF_PF REPLAYSSM_SPEC_A3

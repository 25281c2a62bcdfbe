#!/bin/bash
# t51, device call 2b: the measurement loop of t51-call2.sh as it ran on the
# same warm H100 right after it (t51-call2.sh's bench loop printed nothing:
# its shell function ran the build folder instead of the folder's replayssm;
# the loop below, inline, is what produced the figures; each --out file
# keeps only its last invocation's rows, so the printed rows are the record:
# bench/results/2026-12-06_h100_t51_printed.md). Carry
# gpubin-x/t51q.tar.xz (`main`, `q16` = f6dfb95 of branch t51-m2tc).
d=$(mktemp -d); xz -dc gpubin-x/t51q.tar.xz | tar -C "$d" -x; M=$d/main; Q=$d/q16; A="--backend cuda --family mamba2 --preset nemotron3 --L 16 --target-ms 2"
for r in 1 2; do echo "== round $r"
timeout 90 $M/replayssm bench $A --out $OUT/main.jsonl --batch 64,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/main /'
timeout 90 $Q/replayssm bench $A --out $OUT/q16.jsonl --batch 64,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/q16 /'
REPLAYSSM_M2_FP8_TC=1 timeout 90 $Q/replayssm bench $A --out $OUT/tc.jsonl --batch 64,256,512 --state fp32 --modes dual --read fp8 2>&1 | grep "dual/" | sed 's/^/tc /'
REPLAYSSM_M2_PACK_PF=1 timeout 90 $Q/replayssm bench $A --out $OUT/pf.jsonl --batch 256 --state fp32 --modes dual --read fp8,nvfp4 2>&1 | grep "dual/" | sed 's/^/pf /'
REPLAYSSM_M2_PACK_PF=1 REPLAYSSM_M2_FP8_TC=1 timeout 90 $Q/replayssm bench $A --out $OUT/tcpf.jsonl --batch 256 --state fp32 --modes dual --read fp8 2>&1 | grep "dual/" | sed 's/^/tcpf /'
timeout 90 $M/replayssm bench $A --out $OUT/main.jsonl --batch 256 --state fp32,bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/main /'
timeout 90 $Q/replayssm bench $A --out $OUT/q16.jsonl --batch 256 --state fp32,bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/q16 /'
done

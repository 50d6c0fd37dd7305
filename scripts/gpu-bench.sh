#!/usr/bin/env bash
# Issue 4's end-to-end benchmark on the GPU machine, one model shape per call, with the HF transformers peer
# measured in the same run:
#
#   scripts/gpu-bench.sh qwen3-0.6b|qwen3-8b [--quick]   there, from the repo root, after
#                                                        `scripts/gpu-check.sh prepare` here (it builds
#                                                        .gpu-out/bench_cuda_engine; carry .gpu-out)
#
# Stages, each under `timeout`, with the elapsed time printed:
#   1. the random bf16 checkpoint (scripts/random_checkpoint.py) in $VT_BENCH_DIR (default /tmp/vt-bench)/SHAPE-bf16,
#      reused when a finished one is there;
#   2. bench_cuda_engine (bench/cuda-engine.cpp): decode b1/8/32/128, prefill 512/2048/8192, load -> first token;
#   3. bench_cuda_engine again, decode b1 with CUDA graphs off: the null control for the graphs;
#   4. bench/cuda_hf.py with what is left of the time limit ($VT_BENCH_LIMIT_S, default 540 s, so that the 8B shape
#      fits one 10-minute call): eager decode, static cache + torch.compile at batch 1, prefill, load;
#   5. the table (bench/cuda_table.py), printed last.
# --quick: one run each, decode b1 and b32, prefill 2048 (a smoke test of the whole chain, compile included).
# VT_BENCH_HF=0: our engine only (no peer; for iterating on the engine, never for a RESULTS row).
# VT_BENCH_HF_BATCHES / VT_BENCH_HF_PREFILL: the peer's decode batches and prefill lengths (default: ours), e.g.
# 1 and 2048 so that HF's compiled batch 1 fits the time limit at 0.6B, where its eager decode is slow.
# Logs and JSON go to $OUT when set (8 files, the most that come back: checkpoint.log engine.log engine.json
# engine-graphs-off.json engine-dedup.json hf.log hf.json table.txt), else .gpu-out/bench/SHAPE/. bench/cuda-report.mjs turns the JSON into bench/RESULTS.md rows.
# Exit code 0 when both sides ran every workload, 1 otherwise.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-}
. scripts/bench-checkpoint.sh
require_shape "$shape" "scripts/gpu-bench.sh qwen3-0.6b|qwen3-8b [--quick]"
quick=0
[ "${2:-}" = --quick ] && quick=1
out=${OUT:-$root/.gpu-out/bench/$shape}
mkdir -p "$out"
ckpt=${VT_BENCH_DIR:-/tmp/vt-bench}/$shape-bf16
limit=${VT_BENCH_LIMIT_S:-540}
bin=$root/.gpu-out/bench_cuda_engine
[ -x "$bin" ] || { echo "gpu-bench: $bin missing: run 'scripts/gpu-check.sh prepare' on the build machine"; exit 1; }

t_all=$SECONDS
stage() { echo "[$(printf '%4d' $((SECONDS - t_all))) s] $*"; }
export VT_BENCH_SHAPE=$shape
VT_BENCH_COMMIT=$(cat .gpu-out/commit.txt 2>/dev/null || echo unknown)
VT_BENCH_GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
export VT_BENCH_COMMIT VT_BENCH_GPU
if [ "$quick" = 1 ]; then
  runs=1 batches=1,32 prefill=2048
else
  runs=3 batches=1,8,32,128 prefill=512,2048,8192
fi
stage "gpu-bench $shape: $VT_BENCH_GPU; commit $VT_BENCH_COMMIT; $runs run(s); limit $limit s; results in $out"

# 1. The checkpoint.
t=$SECONDS
bench_checkpoint "$shape" "$ckpt" "$out/checkpoint.log" 300 || exit 1
stage "checkpoint: $((SECONDS - t)) s"

# 2. Our engine, CUDA graphs on (the default). The GPU's clocks, power and temperature around it go into engine.log:
# the same build has run ~1.3% apart at batch 1 on two instances of the machine (bench/RESULTS.md, session 10).
clocks() { nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>/dev/null | sed "s/^/clocks $1: /"; }
t=$SECONDS
clocks before > "$out/engine.log"
timeout 240 "$bin" --model "$ckpt" --runs "$runs" --batches "$batches" --prefill "$prefill" --json "$out/engine.json" \
  2>&1 | tee -a "$out/engine.log"
engine_rc=${PIPESTATUS[0]}
clocks after >> "$out/engine.log"
stage "engine: exit $engine_rc, $((SECONDS - t)) s"

# 3. The null control: batch-1 decode with graphs off, same params otherwise.
t=$SECONDS
timeout 90 "$bin" --model "$ckpt" --runs "$runs" --graphs off --only decode --batches 1 \
  --json "$out/engine-graphs-off.json" >> "$out/engine.log" 2>&1
graphs_off_rc=$?
grep -E '^(decode|FAIL)' "$out/engine.log" | tail -1 | sed 's/^/graphs off: /'
stage "engine, graphs off: exit $graphs_off_rc, $((SECONDS - t)) s"

# 3b. Graph dedup against its null control (the main run, dedup off): executables and device bytes after load,
# and batch-1 decode, with buckets sharing executables through cuGraphExecUpdate.
t=$SECONDS
timeout 90 "$bin" --model "$ckpt" --runs "$runs" --dedup on --only decode --batches 1,8 \
  --json "$out/engine-dedup.json" > /tmp/vt-bench-dedup.log 2>&1
dedup_rc=$?
grep -E '^memory after load' "$out/engine.log" | head -1 | sed 's/^/dedup off: /'
cat /tmp/vt-bench-dedup.log >> "$out/engine.log"
grep -E '^(memory after load|decode)' /tmp/vt-bench-dedup.log | sed 's/^/dedup on: /'
stage "engine, dedup on: exit $dedup_rc, $((SECONDS - t)) s"

# 4. The peer, in what is left (minus a margin for the table and for timeout's grace).
t=$SECONDS
budget=$((limit - (SECONDS - t_all) - 20))
hf_rc=1
if [ "${VT_BENCH_HF:-1}" = 0 ]; then
  stage "HF: skipped (VT_BENCH_HF=0)"
elif [ "$budget" -lt 60 ]; then
  stage "HF: skipped, only $budget s left"
else
  timeout $((budget + 15)) python3 bench/cuda_hf.py --model "$ckpt" --runs "$runs" --batches "${VT_BENCH_HF_BATCHES:-$batches}" \
    --prefill "${VT_BENCH_HF_PREFILL:-$prefill}" --budget-s "$budget" --json "$out/hf.json" > "$out/hf.log" 2>&1
  hf_rc=$?
  grep -E '^(cuda_hf|device|weights|load|prefill|decode|note|FAIL)' "$out/hf.log"
  [ "$hf_rc" = 0 ] || tail -5 "$out/hf.log"
  stage "HF: exit $hf_rc, $((SECONDS - t)) s (budget $budget s)"
fi

# 5. The table, last.
stage "total $((SECONDS - t_all)) s"
echo
python3 bench/cuda_table.py --engine "$out/engine.json" --graphs-off "$out/engine-graphs-off.json" --hf "$out/hf.json" \
  | tee "$out/table.txt"
[ "$engine_rc" = 0 ] && [ "$graphs_off_rc" = 0 ] && [ "$hf_rc" = 0 ]

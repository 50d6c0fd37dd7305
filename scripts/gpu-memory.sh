#!/usr/bin/env bash
# Issue 5's memory benchmark on the GPU machine: one checkpoint, one workload, our engine and HF transformers in the
# same run, each under the same external sampler (bench/memory.py: PSS, RSS, GPU bytes of the process tree and the
# MemAvailable drop every 100 ms, split by the phases the workload announces).
#
#   scripts/gpu-memory.sh [qwen3-8b|qwen3-0.6b] [cuda|cpu]
#                        there, from the repo root, after `scripts/gpu-check.sh prepare` here (it builds
#                        .gpu-out/bench_memory_engine; carry .gpu-out). cpu: both sides on the GPU machine's CPU
#                        (ours with float32 activations, the CPU backend's; HF with torch's default threads), the
#                        issue's CPU table measured like the GPU one: same machine, same run.
#
# Stages, each under `timeout`, with the elapsed time printed:
#   1. the random bf16 checkpoint (scripts/random_checkpoint.py, ~35 s for the 8B shape) in
#      $VT_BENCH_DIR (default /tmp/vt-bench)/SHAPE-bf16, reused when a finished one is there (its marker file);
#   2. the null controls: bench_memory_engine --control and memory_hf.py --control (the processes, nothing loaded);
#   3. ours: bench_memory_engine (bench/memory-engine.cpp) on cuda, bf16 activations, KV pool sized for the workload;
#   4. HF: bench/memory_hf.py --device cuda (from_pretrained with device_map='cuda', one generate() over the batch);
#   5. the table with the ratios and the target checks (bench/memory_table.py), printed last.
# Workload on both sides: 4 requests x 512 prompt tokens (the same ids) + exactly 128 new tokens, greedy, then
# 1000 ms idle. Nothing is dropped from the page cache: the checkpoint is read through before each measured run,
# so both sides load it warm (the usual case for a server restarting on the same machine, and the only one we can
# make equal for both).
# Expected time for the 8B shape, fresh machine: checkpoint ~35 s (+ sync), controls ~15 s, page cache reads ~5 s
# each, ours ~15 s (load ~3 s, serving ~2 s, idle 1 s), HF ~40 s (import ~10 s, from_pretrained ~4-8 s, generate
# ~5 s, idle 1 s): ~2.5 min. Timeouts: checkpoint 150 s, sync 60, controls 20 + 60, reads 45 each, ours 100, HF
# what is left of $VT_BENCH_LIMIT_S (default 500 s) less 20, at most 240: the worst case ends near 500 s, inside one
# 10-minute call.
# Files in $OUT when set (7: checkpoint.log run.log vtengine-control.json hf-control.json vtengine.json hf.json
# table.txt), else .gpu-out/memory/SHAPE/. `python3 bench/memory_table.py --markdown ...` on the same files gives
# the bench/RESULTS.md entry. Exit code 0 when both sides ran, 1 otherwise.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-qwen3-8b}
device=${2:-cuda}
case "$shape/$device" in
  qwen3-0.6b/cuda | qwen3-8b/cuda | qwen3-0.6b/cpu | qwen3-8b/cpu) ;;
  *) echo "usage: scripts/gpu-memory.sh [qwen3-8b|qwen3-0.6b] [cuda|cpu]"; exit 2 ;;
esac
dtype=bfloat16
[ "$device" = cpu ] && dtype=float32
out=${OUT:-$root/.gpu-out/memory/$shape-$device}
mkdir -p "$out"
ckpt=${VT_BENCH_DIR:-/tmp/vt-bench}/$shape-bf16
limit=${VT_BENCH_LIMIT_S:-500}
bin=$root/.gpu-out/bench_memory_engine
[ -x "$bin" ] || { echo "gpu-memory: $bin missing: run 'scripts/gpu-check.sh prepare' on the build machine"; exit 1; }
workload=(--requests 4 --prompt 512 --new 128 --idle-ms 1000)

t_all=$SECONDS
stage() { echo "[$(printf '%4d' $((SECONDS - t_all))) s] $*"; }
left() { echo $((limit - (SECONDS - t_all))); }
export VT_BENCH_SHAPE=$shape
VT_BENCH_COMMIT=$(cat .gpu-out/commit.txt 2>/dev/null || echo unknown)
VT_BENCH_GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
export VT_BENCH_COMMIT VT_BENCH_GPU
stage "gpu-memory $shape on $device: $VT_BENCH_GPU; commit $VT_BENCH_COMMIT; limit $limit s; results in $out"
stage "page cache: nothing dropped; the checkpoint is read through before each side, so both load it warm"

# 1. The checkpoint.
t=$SECONDS
. scripts/bench-checkpoint.sh
bench_checkpoint "$shape" "$ckpt" "$out/checkpoint.log" 150 || exit 1
stage "checkpoint: $((SECONDS - t)) s, $(du -sh "$ckpt" | cut -f1)"

warm() {
  local t=$SECONDS
  timeout 45 cat "$ckpt"/* > /dev/null
  stage "page cache: read $ckpt through in $((SECONDS - t)) s"
}

# measure LABEL FILE SECONDS COMMAND...: COMMAND under the sampler; its stderr (and the sampler's) to run.log.
measure() {
  local label=$1 file=$2 secs=$3
  shift 3
  local t=$SECONDS
  echo "==== $label: $*" >> "$out/run.log"
  timeout "$secs" python3 bench/memory.py --label "$label" --out "$out/$file" -- "$@" > /dev/null 2>> "$out/run.log"
  local rc=$?
  [ "$rc" = 124 ] && echo "==== $label: timed out after $secs s" >> "$out/run.log"
  stage "$label: exit $rc, $((SECONDS - t)) s (timeout $secs s)"
  return "$rc"
}

# 2. The null controls (cheap; a failure here does not stop the rest).
measure "vtengine (control)" vtengine-control.json 20 "$bin" --model "$ckpt" --control --idle-ms 1000
measure "hf (control)" hf-control.json 60 python3 bench/memory_hf.py --checkpoint "$ckpt" --device "$device" --control --idle-ms 1000

# 3. Ours.
warm
measure vtengine vtengine.json 100 "$bin" --model "$ckpt" --device "$device" --dtype "$dtype" "${workload[@]}"
ours_rc=$?
grep -E '^(bench_memory_engine|loaded|served|load failed|estimate failed)' "$out/run.log" | sed 's/^/  ours: /'

# 4. HF, in what is left (minus a margin for the table).
hf_rc=1
[ "$(left)" -ge 100 ] && warm
budget=$(($(left) - 20))
if [ "$budget" -lt 60 ]; then
  stage "HF: skipped, only $budget s left"
else
  [ "$budget" -gt 240 ] && budget=240
  measure hf hf.json "$budget" python3 bench/memory_hf.py --checkpoint "$ckpt" --device "$device" "${workload[@]}"
  hf_rc=$?
  [ "$hf_rc" = 0 ] || tail -5 "$out/run.log"
fi

# 5. The table, last.
stage "total $((SECONDS - t_all)) s"
echo
python3 bench/memory_table.py --ours "$out/vtengine.json" --peer "$out/hf.json" \
  --ours-control "$out/vtengine-control.json" --peer-control "$out/hf-control.json" | tee "$out/table.txt"
[ "$ours_rc" = 0 ] && [ "$hf_rc" = 0 ]

#!/usr/bin/env bash
# Where a batch-1 decode step's time goes, on the GPU machine: Nsight Compute (ncu) times every kernel of a
# window of steady decode steps, and bench/decode_profile.py sums them by kernel per step, against the bytes
# each kernel read from DRAM and the step time bench_cuda_engine measured without the profiler.
#
#   scripts/gpu-profile.sh qwen3-0.6b|qwen3-8b [BATCH]   there, after `scripts/gpu-check.sh prepare` here
#
# The engine runs with CUDA graphs off (ncu serializes kernels either way; without graphs each launch is one
# profiled kernel, the same kernels a graph replays). Launches 0 .. SKIP are the load, the warm-up prefill and
# the first decode steps, left unprofiled; the next COUNT kernels (a few steps' worth) are timed with the clocks
# left as they are (METHOD.md). The difference between the unprofiled step time and the summed kernel times is
# the launch and dependency overhead a graph and PDL can hide, and the per-kernel rows say which kernels are
# far from the copy rate.
# Files in $OUT when set (ncu.csv profile.txt engine.json checkpoint.log), else .gpu-out/profile/SHAPE/.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-}
batch=${2:-1}
. scripts/bench-checkpoint.sh
require_shape "$shape" "scripts/gpu-profile.sh qwen3-0.6b|qwen3-8b [BATCH]"
out=${OUT:-$root/.gpu-out/profile/$shape}
mkdir -p "$out"
ckpt=${VT_BENCH_DIR:-/tmp/vt-bench}/$shape-bf16
bin=$root/.gpu-out/bench_cuda_engine
[ -x "$bin" ] || { echo "gpu-profile: $bin missing: run 'scripts/gpu-check.sh prepare' on the build machine"; exit 1; }
ncu=$(find_ncu)
[ -n "$ncu" ] || { echo "gpu-profile: ncu not found"; exit 1; }
bench_checkpoint "$shape" "$ckpt" "$out/checkpoint.log" 150 || exit 1

# The step time without the profiler, graphs on (the product) and off (what ncu sees).
timeout 120 "$bin" --model "$ckpt" --only decode --batches "$batch" --runs 1 --json "$out/engine.json" > "$out/engine.log" 2>&1
timeout 120 "$bin" --model "$ckpt" --only decode --batches "$batch" --runs 1 --graphs off \
  --json "$out/engine-graphs-off.json" >> "$out/engine.log" 2>&1
# 0.6B: ~230 kernels a step, 8B: ~290; the warm-up request runs 256 steps first.
skip=${VT_PROFILE_SKIP:-20000}
count=${VT_PROFILE_COUNT:-700}
timeout 400 "$ncu" --clock-control none --target-processes all --launch-skip "$skip" --launch-count "$count" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
  --csv --page raw --print-units base \
  "$bin" --model "$ckpt" --only decode --batches "$batch" --runs 1 --graphs off > "$out/ncu.csv" 2> "$out/ncu.log"
echo "ncu: exit $?"
python3 bench/decode_profile.py --csv "$out/ncu.csv" --engine "$out/engine.json" \
  --engine-graphs-off "$out/engine-graphs-off.json" | tee "$out/profile.txt"

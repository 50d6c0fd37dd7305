#!/usr/bin/env bash
# Where a prompt's prefill time goes, our GEMMs against cuBLASLt, on the GPU machine: every kernel of a
# bench_cuda_engine prefill run under Nsight Compute (gpu__time_duration only: one pass a kernel), once per arm
# (ours = VT_CUDA_CUBLASLT=0; cublaslt = VT_CUDA_GEMM=cublaslt), then bench/prefill_profile.py sums the prompt's
# step per kernel side by side. The end-to-end A/B (scripts/gpu-gemm-ab.sh) says how much slower a prefill is; this
# says in which kernels (the GEMMs alone, chained, came out near parity at 2,048 rows on the 0.6B in session 22,
# while its prefill ran 4-8% slower).
#
#   scripts/gpu-prefill-profile.sh qwen3-0.6b|qwen3-8b [LEN]   there, after `scripts/gpu-check.sh prepare` here
# Files in $OUT when set (ncu-ours.csv ncu-cublaslt.csv profile.txt), else .gpu-out/prefill-profile/SHAPE/.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-}
len=${2:-2048}
. scripts/bench-checkpoint.sh
require_shape "$shape" "scripts/gpu-prefill-profile.sh qwen3-0.6b|qwen3-8b [LEN]"
out=${OUT:-$root/.gpu-out/prefill-profile/$shape}
mkdir -p "$out"
ckpt=${VT_BENCH_DIR:-/tmp/vt-bench}/$shape-bf16
bin=$root/.gpu-out/bench_cuda_engine
[ -x "$bin" ] || { echo "gpu-prefill-profile: $bin missing: run 'scripts/gpu-check.sh prepare' on the build machine"; exit 1; }
ncu=$(find_ncu)
[ -n "$ncu" ] || { echo "gpu-prefill-profile: ncu not found"; exit 1; }
bench_checkpoint "$shape" "$ckpt" "$out/checkpoint.log" 300 || exit 1
for arm in ours cublaslt; do
  case "$arm" in ours) env=(VT_CUDA_CUBLASLT=0) ;; cublaslt) env=(VT_CUDA_GEMM=cublaslt) ;; esac
  env "${env[@]}" timeout 240 "$ncu" --clock-control none --target-processes all --launch-count 20000 \
    --metrics gpu__time_duration.sum --csv --page raw --print-units base \
    "$bin" --model "$ckpt" --only prefill --prefill "$len" --runs 1 --graphs off > "$out/ncu-$arm.csv" 2> "$out/ncu-$arm.log"
  echo "ncu $arm: exit $?, $(grep -c '^"' "$out/ncu-$arm.csv") rows"
done
python3 bench/prefill_profile.py --a "ours=$out/ncu-ours.csv" --b "cublaslt=$out/ncu-cublaslt.csv" | tee "$out/profile.txt"

#!/usr/bin/env bash
# Issue 30's end-to-end A/B on the GPU machine: bench_cuda_engine (built by `scripts/gpu-check.sh prepare`; carry
# .gpu-out) on one random checkpoint, our tensor-core GEMMs (VT_CUDA_CUBLASLT=0: cuBLASLt never loaded, as on a
# machine without the toolkit) against cuBLASLt serving the products it takes (VT_CUDA_GEMM=cublaslt, the engine
# before this issue), in the same call, arms alternated (A B A B) so drift lands on both; then the ratio per point.
#
#   scripts/gpu-gemm-ab.sh qwen3-0.6b|qwen3-8b [--quick]
# --quick: decode b1, b32 and prefill 2048, one round; VT_AB_BATCHES, VT_AB_PREFILL, VT_AB_ROUNDS set the points and
# rounds otherwise. VT_AB_ARMS (default "cublaslt ours") adds arms: ours-nopdl (our GEMMs launched without
# programmatic dependent launch, VT_CUDA_GEMM_PDL=0), ours-pdlmma (only the mma.sync tiles with it),
# ours-alt (our GEMMs on the table in VT_AB_ALT_SHAPES, an experiments build's VT_CUDA_GEMM_SHAPES file). Logs and JSON in $OUT when set, else .gpu-out/ab/SHAPE.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
shape=${1:-}
. scripts/bench-checkpoint.sh
require_shape "$shape" "scripts/gpu-gemm-ab.sh qwen3-0.6b|qwen3-8b [--quick]"
out=${OUT:-$root/.gpu-out/ab/$shape}
mkdir -p "$out"
ckpt=${VT_BENCH_DIR:-/tmp/vt-bench}/$shape-bf16
bin=$root/.gpu-out/bench_cuda_engine
batches=${VT_AB_BATCHES:-1,8,16,32,64,128} prefill=${VT_AB_PREFILL:-512,2048,8192} rounds=${VT_AB_ROUNDS:-2}
arms=${VT_AB_ARMS:-cublaslt ours}
[ "${2:-}" = --quick ] && batches=1,32 prefill=2048 rounds=1
export VT_BENCH_SHAPE=$shape VT_BENCH_COMMIT=$(cat .gpu-out/commit.txt 2>/dev/null || echo unknown)
export VT_BENCH_GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
bench_checkpoint "$shape" "$ckpt" "$out/checkpoint-$shape.log" 300 || exit 1
rc=0
for r in $(seq 1 $rounds); do
  for arm in $arms; do
    case "$arm" in
      ours) envs=(VT_CUDA_CUBLASLT=0) ;;
      ours-nopdl) envs=(VT_CUDA_CUBLASLT=0 VT_CUDA_GEMM_PDL=0) ;;
      ours-pdlmma) envs=(VT_CUDA_CUBLASLT=0 VT_CUDA_GEMM_PDL=mma) ;;
      ours-alt) envs=(VT_CUDA_CUBLASLT=0 "VT_CUDA_GEMM_SHAPES=${VT_AB_ALT_SHAPES:?ours-alt needs VT_AB_ALT_SHAPES}") ;;
      cublaslt) envs=(VT_CUDA_GEMM=cublaslt) ;;
      *) echo "gpu-gemm-ab: unknown arm $arm"; exit 2 ;;
    esac
    env "${envs[@]}" timeout 240 "$bin" --model "$ckpt" --runs 2 --batches "$batches" --prefill "$prefill" --only decode,prefill \
      --json "$out/$shape-$arm-$r.json" > "$out/$shape-$arm-$r.log" 2>&1 || rc=1
    echo "$shape $arm round $r: $(grep -cE '^(decode|prefill)' "$out/$shape-$arm-$r.log") points$(grep -m1 -E 'FAIL|failed' "$out/$shape-$arm-$r.log")"
  done
done
python3 - "$out" "$shape" "$rounds" $arms <<'PY'
import json, sys, statistics
out, shape, rounds, arms = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
def load(arm):
    runs = []
    for r in range(1, rounds + 1):
        try: runs.append(json.load(open(f"{out}/{shape}-{arm}-{r}.json")))
        except Exception as e: print("missing", arm, r, e)
    return runs
runs = {arm: load(arm) for arm in arms}
base = "cublaslt" if "cublaslt" in arms else arms[0]
def med(rs, kind, key):
    v = [r[kind][key]["tok_s"]["median"] for r in rs if kind in r and key in r[kind]]
    return statistics.median(v) if v else float("nan")
print(f"\n{shape}: tok/s, median over rounds of each run's median; ours = driver only (cuBLASLt never loaded); "
      f"ratios against {base}")
others = [a for a in arms if a != base]
print(f"{'point':<14}{base:>12}" + "".join(f"{a:>12}{'ratio':>8}" for a in others))
for kind in ("decode", "prefill"):
    keys = sorted({k for rs in runs.values() for r in rs for k in r.get(kind, {})}, key=int)
    for k in keys:
        x = med(runs[base], kind, k)
        print(f"{kind+' '+k:<14}{x:>12.1f}" + "".join(f"{med(runs[a], kind, k):>12.1f}{med(runs[a], kind, k)/x:>8.3f}" for a in others))
PY
exit $rc

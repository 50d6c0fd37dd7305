#!/usr/bin/env bash
# Issue 30's GEMM check on the GPU machine, from binaries built here by `scripts/gpu-check.sh prepare` (carry
# .gpu-out and build/cuda): the wgmma kernels' SASS (HGMMA present, nothing spilled to local memory), the
# tensor-core GEMM op tests, then bench_cuda_gemm (ours against cuBLASLt and the GEMV on the models' shapes, and
# the selection table it measures). Logs and JSON in $OUT when set, else .gpu-out/logs.
#
#   scripts/gpu-gemm.sh [--m 16,32,...] [--quick-tests] [--no-bench] [--no-tests] [--golden]
# --golden: also the golden check with bf16 activations (every fixture through the engine, our GEMMs in prefill).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
logs=${OUT:-$root/.gpu-out/logs}
mkdir -p "$logs"
m_arg=() tests_env=() bench=1 tests=1 golden=0
while [ $# -gt 0 ]; do
  case "$1" in
    --m) m_arg=(--m "$2"); shift ;;
    --quick-tests) tests_env=(VT_TEST_SMALL=1) ;;
    --no-bench) bench=0 ;;
    --no-tests) tests=0 ;;
    --golden) golden=1 ;;
  esac
  shift
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader | sed 's/^/gpu: /'
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
if [ -x "$cuobjdump" ] && [ -f build/cuda/gemm_wgmma.fatbin ]; then
  "$cuobjdump" -sass build/cuda/gemm_wgmma.fatbin > "$logs/gemm_wgmma.sass" 2>&1
  "$cuobjdump" -sass build/cuda/gemm_mma.fatbin > "$logs/gemm_mma.sass" 2>&1
  echo "sass wgmma: $(grep -c HGMMA "$logs/gemm_wgmma.sass") HGMMA, $(grep -c UTMALDG "$logs/gemm_wgmma.sass") UTMALDG, $(grep -cE 'LDL|STL' "$logs/gemm_wgmma.sass") LDL/STL"
  echo "sass mma: $(grep -c HMMA "$logs/gemm_mma.sass") HMMA, $(grep -c LDGSTS "$logs/gemm_mma.sass") LDGSTS, $(grep -cE 'LDL|STL' "$logs/gemm_mma.sass") LDL/STL"
fi
rc=0
if [ "$tests" = 1 ]; then
  t0=$SECONDS
  env "${tests_env[@]}" VT_TEST_ONLY=tensor_gemm timeout 240 .gpu-out/test_cuda_ops > "$logs/test_tensor_gemm.log" 2>&1
  rc=$?
  echo "test_cuda_ops (tensor_gemm): exit $rc, $((SECONDS - t0)) s: $(tail -1 "$logs/test_tensor_gemm.log")"
  grep '^FAIL' "$logs/test_tensor_gemm.log" | head -30
fi
if [ "$golden" = 1 ]; then
  t0=$SECONDS
  timeout 150 .gpu-out/golden_cuda --device cuda --dtype bfloat16 > "$logs/golden_bf16.log" 2>&1
  g=$?
  echo "golden bfloat16: exit $g, $((SECONDS - t0)) s"
  grep -E '^(FAIL|SKIP)' "$logs/golden_bf16.log" | head -20
  sed -n '/^==== golden/,$p' "$logs/golden_bf16.log"
  [ "$g" = 0 ] || rc=1
fi
if [ "$bench" = 1 ]; then
  t0=$SECONDS
  timeout 420 .gpu-out/bench_cuda_gemm "${m_arg[@]}" --json "$logs/gemm.json" > "$logs/bench_gemm.log" 2>&1
  echo "bench_cuda_gemm: exit $?, $((SECONDS - t0)) s"
  cat "$logs/bench_gemm.log"
fi
exit $rc

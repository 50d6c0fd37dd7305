#!/usr/bin/env bash
# The GPU check: CUDA op tests and the CUDA op timings, on the GPU machine, from binaries built on the
# development machine (the GPU machine builds nothing).
#
#   scripts/gpu-check.sh prepare [--arch sm_90a]   here: build the kernels (scripts/build-cuda.mjs, with the
#                                                  experiments' kernels, so the switches can be A/B-timed) and the
#                                                  test and bench binaries into .gpu-out/ (git-ignored through
#                                                  .git/info/exclude; carry it to the GPU machine)
#   scripts/gpu-check.sh [run] [--sanitize]        there: run test_cuda_ops (and, with --sanitize, a small set
#                                                  under compute-sanitizer memcheck), the golden check
#                                                  (test/gpu/golden_cuda.cpp: every fixture on the GPU with fp32
#                                                  and bf16 activations, and batching), test/gpu/model_cuda.cpp
#                                                  (models over the ops against float64), the KV pool's device
#                                                  memory (test/native/test_kv_pool_cuda.cpp) and bench/cuda-ops, keep
#                                                  their logs (in $OUT when set, else .gpu-out/logs), and print
#                                                  a summary table last
#   scripts/gpu-check.sh run --quick               the op tests on small shapes and the golden check only
#
# Exit code of `run`: 0 when every test passed and the bench ran, 1 otherwise.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.gpu-out"
mode=${1:-run}
[ $# -gt 0 ] && shift

prepare() {
  set -e
  cd "$root"
  local exclude; exclude="$(git rev-parse --git-common-dir)/info/exclude"  # also from a worktree
  grep -qx '/.gpu-out/' "$exclude" 2>/dev/null || echo '/.gpu-out/' >> "$exclude"
  local t0=$SECONDS
  node scripts/build-cuda.mjs --experiments "$@"
  local objdir="$root/build/gpu-check/obj"
  mkdir -p "$out" "$objdir"
  local cxx=${CXX:-g++}
  # VT_EXPERIMENTS: these binaries read the timing-only switches (VT_CUDA_SKIP, VT_CUDA_REPLAY,
  # VT_CUDA_SPLIT_KEYS; cuda/src/tuning.h); the addon does not.
  local flags=(-std=c++20 -O2 -pthread -DVT_EXPERIMENTS=1 -Icuda/include -Icuda/src -Ithird_party/nlohmann/include)
  # The whole engine: the op tests need the CPU backend and the CUDA host code, the golden check all of it.
  local srcs=($(node scripts/native-sources.mjs))
  local objs=() pids=() jobs=0 max=$(nproc)
  for s in "${srcs[@]}"; do
    local o="$objdir/$(echo "${s%.cpp}" | tr / _).o"
    objs+=("$o")
    if [ ! -f "$o" ] || [ "$s" -nt "$o" ] || [ -n "$(find cuda -name '*.h' -newer "$o" -o -name '*.inc' -newer "$o" | head -1)" ]; then
      "$cxx" "${flags[@]}" -c "$s" -o "$o" & pids+=($!)
      if (( ++jobs % max == 0 )); then for p in "${pids[@]}"; do wait "$p"; done; pids=(); fi
    fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  local ld=(-pthread -ldl -static-libstdc++ -static-libgcc -s)
  "$cxx" "${flags[@]}" test/native/test_cuda_ops.cpp test/native/cuda_ops/*.cpp "${objs[@]}" "${ld[@]}" -o "$out/test_cuda_ops"
  "$cxx" "${flags[@]}" bench/cuda-ops.cpp "${objs[@]}" "${ld[@]}" -o "$out/bench_cuda_ops"
  # Our tensor-core GEMMs against cuBLASLt and the GEMV on the models' shapes, and the selection table they give.
  "$cxx" "${flags[@]}" bench/cuda-gemm.cpp "${objs[@]}" "${ld[@]}" -o "$out/bench_cuda_gemm"
  # What a launch boundary costs against a grid barrier (bench/cuda-sync.cpp; run by hand).
  "$cxx" "${flags[@]}" bench/cuda-sync.cpp "${objs[@]}" "${ld[@]}" -o "$out/bench_cuda_sync"
  # nlohmann/json is header-only (third_party/): the binary carries it.
  "$cxx" "${flags[@]}" test/gpu/golden_cuda.cpp "${objs[@]}" "${ld[@]}" -o "$out/golden_cuda"
  # The KV pool's device memory through the driver alone: map, grow, trim, out of memory, reserve/free cycles.
  "$cxx" "${flags[@]}" test/native/test_kv_pool_cuda.cpp "${objs[@]}" "${ld[@]}" -o "$out/test_kv_pool_cuda"
  # Models over the CUDA backend's ops against a float64 reference (the dense model and a test-only variant).
  "$cxx" "${flags[@]}" -Itest/native test/gpu/model_cuda.cpp "${objs[@]}" "${ld[@]}" -o "$out/model_cuda"
  # The end-to-end benchmark's engine side (scripts/gpu-bench.sh runs it), and the commit it was built from.
  "$cxx" "${flags[@]}" bench/cuda-engine.cpp "${objs[@]}" "${ld[@]}" -o "$out/bench_cuda_engine"
  # The memory benchmark's engine side (scripts/gpu-memory.sh runs it under bench/memory.py).
  "$cxx" "${flags[@]}" bench/memory-engine.cpp "${objs[@]}" "${ld[@]}" -o "$out/bench_memory_engine"
  echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo '+uncommitted')" > "$out/commit.txt"
  echo "gpu-check prepare: $(du -sh "$out" | cut -f1) in .gpu-out/ in $((SECONDS - t0)) s"
}

run() {
  local sanitize=0 quick=0 bench_args=()
  for a in "$@"; do
    case "$a" in --sanitize) sanitize=1 ;; --quick) quick=1 ;; *) bench_args+=("$a") ;; esac
  done
  local logs=${OUT:-$out/logs}
  mkdir -p "$logs"
  for b in test_cuda_ops bench_cuda_ops golden_cuda model_cuda test_kv_pool_cuda; do
    [ -x "$out/$b" ] || { echo "gpu-check: $out/$b missing: run 'scripts/gpu-check.sh prepare' on the build machine"; exit 1; }
  done
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null \
    | sed 's/^/gpu: /' | tee "$logs/gpu.txt"
  local t0=$SECONDS
  local test_rc
  if [ "$quick" = 1 ]; then
    VT_TEST_SMALL=1 "$out/test_cuda_ops" > "$logs/test_cuda_ops.log" 2>&1
    test_rc=$?
  else
    "$out/test_cuda_ops" 2>&1 | tee "$logs/test_cuda_ops.log"
    test_rc=${PIPESTATUS[0]}
  fi
  local test_secs=$((SECONDS - t0))

  # --sanitize: the small test set again under compute-sanitizer memcheck (out-of-bounds and misaligned
  # accesses the poisoned guards cannot see, such as reads past a buffer).
  local san_rc=0 san_line="not run (pass --sanitize)"
  if [ "$sanitize" = 1 ]; then
    local cs
    cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    t0=$SECONDS
    VT_TEST_SMALL=1 timeout 75 "$cs" --tool memcheck --report-api-errors no --error-exitcode 3 "$out/test_cuda_ops" \
      > "$logs/memcheck.log" 2>&1
    san_rc=$?
    san_line="exit $san_rc, $((SECONDS - t0)) s: $(grep -m1 -E '^[0-9]+ passed' "$logs/memcheck.log"); $(grep -m1 'ERROR SUMMARY' "$logs/memcheck.log")"
    [ "$san_rc" = 124 ] && san_line="timed out after 75 s ($san_line)"
    grep -m5 -E 'Invalid|Error|error' "$logs/memcheck.log" | grep -v 'ERROR SUMMARY: 0' | head -5
  fi

  # The golden check: every fixture through the engine on the GPU (fp32 activations: the CPU's tolerances;
  # bf16: issue 4's), each with a batching check. Run from the root: it reads test/fixtures.
  # float32 and bfloat16 with CUDA graphs (the default), float32 without them (the eager launch path), float32
  # with each graph captured by the first step that needs it (cudaGraphs.capture 'first-use'). (The fused norm's
  # null control, a bfloat16 mode with separate norm kernels, went with its switch: its A/B is settled.)
  local golden_rc=0 g modes=(float32 bfloat16 float32-nographs float32-lazygraphs)
  for g in "${modes[@]}"; do
    t0=$SECONDS
    local gargs=(--dtype "${g%%-*}")
    [ "$g" = float32-nographs ] && gargs+=(--graphs off)
    [ "$g" = float32-lazygraphs ] && gargs+=(--capture first-use)
    (cd "$root" && timeout 120 "$out/golden_cuda" --device cuda "${gargs[@]}") > "$logs/golden_$g.log" 2>&1
    local rc=$?
    echo "golden $g: exit $rc, $((SECONDS - t0)) s" >> "$logs/golden.txt"
    [ "$rc" = 0 ] || golden_rc=1
    grep -E '^(FAIL|SKIP)' "$logs/golden_$g.log" | head -20
  done

  # Models over the ops interface (the dense model and a variant in another order) against float64, the hybrid
  # model against the CPU decoder. From the root: it reads test/fixtures.
  (cd "$root" && "$out/model_cuda") > "$logs/model_cuda.log" 2>&1
  local model_rc=$?
  # The KV pool that grows (test/native/test_kv_pool_cuda.cpp).
  "$out/test_kv_pool_cuda" > "$logs/kv_pool.log" 2>&1
  local kv_rc=$?
  local bench_rc=0 bench_secs=0
  if [ "$quick" = 0 ]; then
    t0=$SECONDS
    "$out/bench_cuda_ops" "${bench_args[@]}" 2>&1 | tee "$logs/bench_cuda_ops.log"
    bench_rc=${PIPESTATUS[0]} bench_secs=$((SECONDS - t0))
  fi

  echo
  echo "================ gpu-check summary ================"
  echo "test_cuda_ops: $(tail -1 "$logs/test_cuda_ops.log")  (exit $test_rc, ${test_secs} s)"
  grep '^FAIL' "$logs/test_cuda_ops.log" | head -20
  echo "memcheck (VT_TEST_SMALL): $san_line"
  cat "$logs/golden.txt"
  echo "model_cuda: $(tail -1 "$logs/model_cuda.log") (exit $model_rc)"
  echo "test_kv_pool_cuda: $(tail -1 "$logs/kv_pool.log") (exit $kv_rc)"
  grep '^FAIL' "$logs/kv_pool.log" | head -10
  grep -E '^(FAIL|SKIP)' "$logs/model_cuda.log" | head -10
  for g in "${modes[@]}"; do
    sed -n '/^==== golden/,$p' "$logs/golden_$g.log"
  done
  if [ "$quick" = 0 ]; then
    echo "bench_cuda_ops: exit $bench_rc, ${bench_secs} s"
    sed -n '/^op  /,$p' "$logs/bench_cuda_ops.log"
  fi
  [ "$test_rc" = 0 ] && [ "$san_rc" = 0 ] && [ "$bench_rc" = 0 ] && [ "$golden_rc" = 0 ] && [ "$model_rc" = 0 ] && [ "$kv_rc" = 0 ]
}

case "$mode" in
  prepare) prepare "$@" ;;
  run) run "$@" ;;
  *) echo "usage: scripts/gpu-check.sh [prepare [--arch sm_90a] | run [--quick] [--sanitize] [--reps N]]"; exit 2 ;;
esac

#!/usr/bin/env bash
# Builds the in-process fuzz targets (test/fuzz/fuzz_*.cpp: the safetensors header checks and the config.json
# parser) under ASan + UBSan and runs each for VT_FUZZ_SECONDS (default 15), printing each target's runs.
# With clang's libFuzzer when clang++ can link -fsanitize=fuzzer (coverage-guided), else g++ with
# test/fuzz/driver.cpp (random mutation of the seed corpus, fixed seed). Seeds come from the checkpoints in the
# repository (scripts/fuzz-seeds.mjs), written at run time. Output: test/fuzz/build/ (git-ignored); a crashing
# input is kept as test/fuzz/build/<target>-crash-input.
#
#   scripts/fuzz-parsers.sh                       # every target, 15 s each
#   VT_FUZZ_SECONDS=600 scripts/fuzz-parsers.sh config
#   VT_FUZZ_RUNS=100000 scripts/fuzz-parsers.sh   # a fixed number of runs instead (repeatable with the g++ driver)
#
# Env: VT_FUZZ_SECONDS, VT_FUZZ_RUNS, VT_FUZZ_SEED (default 1), CXX (g++ or clang++; default: clang++ if it has
# libFuzzer, else g++). Exit code 0 only if every target built and ran without a crash.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${VT_FUZZ_SECONDS:-15}
seed=${VT_FUZZ_SEED:-1}
out=test/fuzz/build
mkdir -p "$out/obj"

# The sources each target needs (nothing else of the engine).
declare -A target_sources=(
  [safetensors_header]="cuda/src/loader/safetensors_header.cpp cuda/src/loader/json_fields.cpp"
  [config]="cuda/src/loader/config.cpp cuda/src/loader/config_arithmetic.cpp cuda/src/loader/json_fields.cpp cuda/src/loader/json_file.cpp cuda/src/models/registry.cpp cuda/src/models/dense_model.cpp cuda/src/models/state_layout.cpp cuda/src/models/qwen3_5_model.cpp cuda/src/models/weight_schema.cpp cuda/src/loader/weights.cpp"
)
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(safetensors_header config); fi

cxx=${CXX:-}
if [ -z "$cxx" ]; then
  if command -v clang++ >/dev/null; then cxx=clang++; else cxx=g++; fi
fi
mode=driver
if [[ "$cxx" == *clang* ]] &&
   echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long){return 0;}' |
     "$cxx" -fsanitize=fuzzer -x c++ - -o "$out/.probe" 2>/dev/null; then
  mode=libfuzzer
fi
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
       -Icuda/include -Icuda/src -Ithird_party/nlohmann/include)
if [ "$mode" = libfuzzer ]; then flags+=(-fsanitize=fuzzer-no-link); fi
echo "fuzz: $mode mode, $cxx, ${VT_FUZZ_RUNS:+$VT_FUZZ_RUNS runs}${VT_FUZZ_RUNS:-$seconds s} per target, seed $seed"

# An object is rebuilt when its source, a header of the engine's loader, or this script is newer.
stamp_deps=(cuda/src/loader/*.h cuda/src/status.h cuda/include/vt_engine.h test/fuzz/*.h "$0")
stale() {  # obj src: true when obj must be rebuilt
  local dep
  [ -f "$1" ] || return 0
  for dep in "$2" "${stamp_deps[@]}"; do
    if [ "$dep" -nt "$1" ]; then return 0; fi
  done
  return 1
}
compile() {  # src obj
  if stale "$2" "$1"; then
    echo "  compiling $1"
    "$cxx" "${flags[@]}" -Itest/fuzz -c "$1" -o "$2"
  fi
}

node scripts/fuzz-seeds.mjs "$out/corpus"

if [ "$mode" = driver ]; then compile test/fuzz/driver.cpp "$out/obj/driver.o"; fi
status=0
summary=()
for t in "${targets[@]}"; do
  srcs=${target_sources[$t]:-}
  if [ -z "$srcs" ]; then echo "fuzz: no target $t (known: ${!target_sources[*]})"; exit 2; fi
  objs=()
  for s in $srcs test/fuzz/fuzz_$t.cpp; do
    o="$out/obj/$(basename "${s%.cpp}").o"
    compile "$s" "$o"
    objs+=("$o")
  done
  exe="$out/fuzz_$t"
  if [ "$mode" = libfuzzer ]; then
    "$cxx" "${flags[@]}" -fsanitize=fuzzer "${objs[@]}" -o "$exe"
  else
    "$cxx" "${flags[@]}" "${objs[@]}" "$out/obj/driver.o" -o "$exe"
  fi
  limit=(-max_total_time="$seconds")
  if [ -n "${VT_FUZZ_RUNS:-}" ]; then limit=(-runs="$VT_FUZZ_RUNS"); fi
  log="$out/fuzz_$t.log"
  echo "fuzz: running $t"
  set +e
  ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    timeout $((seconds + 120)) "$exe" "${limit[@]}" -seed="$seed" -max_len=1048576 -dict=test/fuzz/json.dict \
    -artifact_prefix="$out/$t-" "$out/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 | grep -oE '[0-9]+' | head -1 || true)
  secs=$(grep -oE 'Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 | grep -oE '[0-9]+' | tail -1 || true)
  seeds=$(find "$out/corpus/$t" -type f | wc -l)
  if [ $rc -eq 0 ] && [ -n "$runs" ]; then
    summary+=("$(printf '  %-20s %10s runs in %s s from %s seeds: no crash' "$t" "$runs" "$secs" "$seeds")")
    summary+=("    $(grep -E '^outcomes:' "$log" | tail -1)")
  else
    status=1
    tail -40 "$log"
    summary+=("$(printf '  %-20s CRASHED (exit %s); input: %s, log: %s' "$t" "$rc" "$(ls "$out/$t-"crash* 2>/dev/null | head -1)" "$log")")
  fi
done
echo "fuzz summary ($mode, ASan + UBSan):"
printf '%s\n' "${summary[@]}"
exit $status

#!/usr/bin/env bash
# Builds and runs the native tests (test/native/test_*.cpp) under AddressSanitizer + LeakSanitizer +
# UndefinedBehaviorSanitizer, and the parser fuzz targets when the checkout has them. Any report fails the run:
# UBSan does not recover (-fno-sanitize-recover=all), ASan halts on the first error, LSan checks every test
# program at exit. No suppressions: a report is a bug to fix (a third-party false positive would be suppressed
# here, with the reason, and none is today).
#
#   bash scripts/sanitize.sh [name-filter ...]     e.g. `bash scripts/sanitize.sh memory_plan`
#
# The sanitized objects live in test/native/build-asan (VT_NATIVE_BUILD_DIR), apart from the normal build's
# test/native/build, so the two never mix in one archive or link. Cold (no build-asan folder) on a 2-core VM,
# 2026-12-02: 406 s with other builds on the machine (288 s compiling the engine), 454 s as the last step of a
# fresh-clone .ci/run (whole CI 863 s of its 90 min); a rerun after one source changed takes a minute or two.
#
# Environment: VT_FUZZ_SECONDS (default 20) is how long each fuzz target runs; CXX overrides the compiler;
# ASAN_OPTIONS / UBSAN_OPTIONS set by the caller win over the defaults below.
#
# The golden JS tests against an ASan build of the addon (by hand; not run by this script or CI). The addon is a
# shared library loaded by an uninstrumented node, so libasan must be loaded first (LD_PRELOAD), and LSan must be
# off: node itself keeps allocations alive to exit that LSan would report, which are not ours. Build it in a
# scratch clone so that the normal build/Release stays as it is (node-gyp-build loads build/Release):
#
#   git clone . /tmp/vt-asan && ln -s "$PWD/node_modules" /tmp/vt-asan/node_modules && cd /tmp/vt-asan
#   CXXFLAGS='-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g' \
#     LDFLAGS='-fsanitize=address,undefined' npx node-gyp rebuild -j max && npm run build:ts
#   LD_PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)" \
#     ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
#     npx vitest run test/golden/greedy.test.ts
#
# The ASan runtime must come from the same g++ as the build (g++ -print-file-name names it). Tried 2026-12-02:
# test/golden/greedy.test.ts 32/32 and all of test/golden 118/118 pass with no report (100 s); test/unit and
# test/examples pass with no report except test/unit/memory-sampler.test.ts, whose "idle PSS below load PSS"
# cannot hold under ASan (its quarantine keeps freed memory), which is not a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

san='-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer'
export VT_NATIVE_BUILD_DIR=test/native/build-asan
export VT_NATIVE_CXXFLAGS="$san"
export VT_NATIVE_LDFLAGS='-fsanitize=address,undefined'
# detect_leaks=1: LeakSanitizer at each program's exit. detect_stack_use_after_return: use of a dead frame's
# locals. check_initialization_order: static init order bugs between the engine's translation units.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# Programs run several times slower under ASan; the per-program limit grows to match.
export VT_NATIVE_TEST_TIMEOUT_S="${VT_NATIVE_TEST_TIMEOUT_S:-1200}"

status=0
node scripts/native-tests.mjs "$@" || status=1

# The in-process fuzz targets for the header and config parsers, from another branch: run when present.
if [[ -d test/fuzz && -f scripts/fuzz-parsers.sh ]]; then
  echo "=== fuzz targets (${VT_FUZZ_SECONDS:-20} s each)"
  VT_FUZZ_SECONDS="${VT_FUZZ_SECONDS:-20}" bash scripts/fuzz-parsers.sh || status=1
else
  echo "=== fuzz targets: none in this checkout (test/fuzz and scripts/fuzz-parsers.sh), skipped"
fi

echo "sanitize: $([[ $status == 0 ]] && echo PASS || echo FAIL) in $(( $(date +%s) - start )) s"
exit $status

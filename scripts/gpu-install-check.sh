#!/usr/bin/env bash
# Issue 30's acceptance run on the GPU machine: what a user installs (the packed tarball, prebuilt binary, only the
# NVIDIA driver), against the engine with cuBLASLt (the toolkit present), in one warm machine's calls.
#
#   scripts/gpu-install-check.sh prepare   here: the x64 prebuild (npm run prebuild --arch x64, unless one is there),
#                                          an npm cache of the runtime dependencies (package-check.sh --make-cache),
#                                          the bench / golden binaries (scripts/gpu-check.sh prepare --arch sm_90a),
#                                          then node, npm and all of it cut into parts (scripts/gpu-node.sh pack):
#                                          carry ONE part (and .gpu-carry/node-bundle.sha256) per call
#   scripts/gpu-install-check.sh stash     there, every call before the last: keeps the part carried
#   scripts/gpu-install-check.sh lt        there, once every part is in: the engine with cuBLASLt, toolkit present
#                                          (bench_cuda_engine, VT_CUDA_GEMM=cublaslt: the issue's reference), both
#                                          shapes; keeps its JSON in /tmp/vt-install for `user`
#   scripts/gpu-install-check.sh user      there, the next call: the toolkit moved aside (/usr/local/cuda*, ldconfig),
#                                          `npm pack` of this tree, package-check.sh --device cuda (install, doctor,
#                                          golden through the package), golden_cuda in its four modes, bench_cuda_engine
#                                          as shipped (no switches)
#   scripts/gpu-install-check.sh node      there, the next call: with default load options through the installed
#                                          package, toolkit still hidden: bench/node-api.mjs (with the idle engine's
#                                          memory after its load) and bench/serve.mjs at 8, 32 and 128 streams; the
#                                          summary table last (scripts/install-check-table.py)
#
# Six calls on one warm machine (each call's files in /tmp stay while it is warm): the parts (4 with the defaults,
# one per call, `stash`; the last part's call can run `lt` directly), lt, user, node.
#
# Figures: bench_cuda_engine's decode 1-128 and prefill 512 / 2,048 / 8,192 (VT_INSTALL_RUNS runs each, default 2);
# driver-only / cuBLASLt per point (issue: >= 0.95); Node API and serve (defaults) / bench_cuda_engine's cuBLASLt
# decode at the same N (issue: >= 0.9). Logs and JSON in $OUT.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mode=${1:-}
keep=/tmp/vt-install
shapes=${VT_INSTALL_SHAPES:-qwen3-0.6b qwen3-8b}
runs=${VT_INSTALL_RUNS:-2}
out=${OUT:-$root/.gpu-out/install}

prepare() {
  set -e
  [ -f prebuilds/linux-x64/vtengine.node ] || npm run prebuild -- --arch x64
  if [ ! -d build/npm-cache ]; then
    npm pack --ignore-scripts --pack-destination build >/dev/null
    bash scripts/package-check.sh build/vtengine-*.tgz --device cpu --make-cache build/npm-cache
    rm -f build/vtengine-*.tgz
    # (the cache keeps the installed tarball too, 30 MB: only the dependencies travel; it is packed there)
    local key
    for key in $(grep -rhoa '"key":"pacote:tarball:file:[^"]*"' build/npm-cache/_cacache/index-v5 | cut -d'"' -f4); do
      npm cache clean "$key" --cache build/npm-cache --force
    done
    npm cache verify --cache build/npm-cache >/dev/null
  fi
  scripts/gpu-check.sh prepare --arch sm_90a
  VT_WITH_NPM=1 scripts/gpu-node.sh pack prebuilds/linux-x64 build/npm-cache .gpu-out/bench_cuda_engine \
    .gpu-out/golden_cuda .gpu-out/commit.txt
  echo "gpu-install-check: carry one .gpu-carry/node-bundle.part-NN and .gpu-carry/node-bundle.sha256 per call"
}

engine_runs() {  # tag env...: bench_cuda_engine on each shape, VT_INSTALL_RUNS runs
  local tag=$1; shift
  for shape in $shapes; do
    env "$@" timeout 240 .gpu-out/bench_cuda_engine --model "/tmp/vt-bench/$shape-bf16" --runs "$runs" \
      --batches 1,8,16,32,64,128 --prefill 512,2048,8192 --only decode,prefill --json "$keep/$shape-$tag.json" \
      > "$out/$shape-$tag.log" 2>&1
    echo "bench_cuda_engine $shape $tag: exit $?, $(grep -cE '^(decode|prefill)' "$out/$shape-$tag.log") points"
  done
}

lt() {
  scripts/gpu-node.sh use >/dev/null || exit 1
  mkdir -p "$keep" "$out"
  . scripts/bench-checkpoint.sh
  for shape in $shapes; do bench_checkpoint "$shape" "/tmp/vt-bench/$shape-bf16" "$out/checkpoint-$shape.log" 300 || exit 1; done
  engine_runs cublaslt VT_CUDA_GEMM=cublaslt
}

hide_toolkit() {
  mkdir -p /tmp/vt-hidden-cuda
  for d in /usr/local/cuda /usr/local/cuda-*; do [ -e "$d" ] && mv "$d" /tmp/vt-hidden-cuda/; done
  ldconfig
  echo "toolkit hidden: $(ldconfig -p | grep -c 'libcublas') cuBLAS entries in ldconfig -p; nvcc $(command -v nvcc || echo absent)"
}

user() {
  export PATH=/tmp/vt-node/bin:$PATH
  [ -x /tmp/vt-node/bin/node ] || { echo "gpu-install-check: run 'lt' first (node is unpacked there)"; exit 1; }
  mkdir -p "$keep" "$out"
  rm -rf build/Release  # (the checkout's addon: every Node figure below comes from the package's prebuild)
  hide_toolkit
  local tgz
  tgz=$(npm pack --ignore-scripts --pack-destination /tmp 2>/dev/null | tail -1)
  echo "npm pack: /tmp/$tgz ($(du -h "/tmp/$tgz" | cut -f1))"
  bash scripts/package-check.sh "/tmp/$tgz" --device cuda --expect-gpu sm_90a --offline build/npm-cache --keep \
    > "$out/package-check.log" 2>&1
  echo "package-check: exit $?; $(grep -E '^package-check: [0-9]+ failed' "$out/package-check.log")"
  grep -E 'FAIL|cuBLASLt|usable' "$out/package-check.log" | head -8
  local pkg
  pkg="$(grep -o 'into /tmp/vt-package-check[^ ]*/app' "$out/package-check.log" | head -1 | cut -c6-)/node_modules/vtengine"
  for g in float32 bfloat16 float32-nographs float32-lazygraphs; do
    local gargs=(--dtype "${g%%-*}")
    [ "$g" = float32-nographs ] && gargs+=(--graphs off)
    [ "$g" = float32-lazygraphs ] && gargs+=(--capture first-use)
    timeout 120 .gpu-out/golden_cuda --device cuda "${gargs[@]}" > "$out/golden-$g.log" 2>&1
    echo "golden_cuda $g (toolkit hidden): exit $?, $(grep -m1 -E '^==== golden' "$out/golden-$g.log")"
  done
  echo "$pkg" > "$keep/pkg.txt"
  engine_runs driver
}

node_runs() {
  export PATH=/tmp/vt-node/bin:$PATH
  local pkg
  pkg=$(cat "$keep/pkg.txt" 2>/dev/null) || { echo "gpu-install-check: run 'user' first"; exit 1; }
  ldconfig -p | grep -q libcublas && echo "gpu-install-check: cuBLAS is back on the library path (a fresh machine?)"
  for shape in $shapes; do
    VT_BENCH_PACKAGE=$pkg timeout 200 node bench/node-api.mjs --model "/tmp/vt-bench/$shape-bf16" --batches 8,32,128 \
      --runs 3 --defaults --json "$keep/$shape-node.json" > "$out/$shape-node.log" 2>&1
    echo "node-api $shape --defaults: exit $?"
    grep -E '^(vtengine from|idle after load)' "$out/$shape-node.log"
    VT_BENCH_PACKAGE=$pkg timeout 200 node bench/serve.mjs --model "/tmp/vt-bench/$shape-bf16" --batches 8,32,128 \
      --runs 2 --defaults --json "$keep/$shape-serve.json" > "$out/$shape-serve.log" 2>&1
    echo "serve $shape --defaults: exit $?"
  done
  cp "$keep"/*.json "$out/" 2>/dev/null
  python3 scripts/install-check-table.py "$keep" $shapes | tee "$out/table.txt"
}

case "$mode" in
  prepare) prepare ;;
  stash) scripts/gpu-node.sh stash ;;
  lt) lt ;;
  user) user ;;
  node) node_runs ;;
  *) echo "usage: scripts/gpu-install-check.sh prepare | stash | lt | user | node"; exit 2 ;;
esac

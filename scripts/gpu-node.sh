#!/usr/bin/env bash
# Node.js on the GPU machine, which has none: this machine's node binary, the package's runtime dependencies,
# dist/ and the built addon travel as one archive, cut into parts small enough to ride beside the working tree
# (the device tool takes 64 MiB per call and the tracked tree is ~53 MiB), one part per call while the machine
# stays warm.
#
#   scripts/gpu-node.sh pack [PATH...]  here: .gpu-carry/node-bundle.part-NN (VT_PART_MIB each, default 9), with
#                                    any extra PATHs of the tree (e.g. .gpu-out/golden_cuda); prints the parts.
#                                    VT_WITH_NPM=1 adds this machine's npm (there: npm and npx beside node), for
#                                    installing the packed tarball (scripts/package-check.sh --offline)
#   scripts/gpu-node.sh stash        there, in every call: keeps the parts carried so far in /tmp/vt-parts
#   scripts/gpu-node.sh use          there, in the last call: unpacks node into /tmp/vt-node (then
#                                    export PATH=/tmp/vt-node:$PATH) and node_modules, dist and the addon into the
#                                    working tree; fails if a part is missing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

pack() {
  local mib=${VT_PART_MIB:-9} stage
  cd "$root"
  local exclude; exclude="$(git rev-parse --git-common-dir)/info/exclude"  # also from a worktree
  grep -qx '/.gpu-carry/' "$exclude" 2>/dev/null || echo '/.gpu-carry/' >> "$exclude"
  [ -f build/Release/vtengine.node ] && [ -f dist/index.js ] || { echo "gpu-node: build the addon and dist first"; exit 1; }
  stage=$(mktemp -d)
  cp "$(command -v node)" "$stage/node"
  local with_npm=()
  if [ "${VT_WITH_NPM:-0}" = 1 ]; then
    cp -r "$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")" "$stage/npm"
    with_npm=(npm)
  fi
  # The runtime dependencies only (npm's own list), not the dev tools.
  npm ls --omit=dev --all --parseable 2>/dev/null | sed "s|^$root/||" | grep '^node_modules/' > "$stage/deps.txt"
  tar -cf "$stage/tree.tar" -T "$stage/deps.txt" dist build/Release/vtengine.node package.json "$@"
  mkdir -p .gpu-carry
  rm -f .gpu-carry/node-bundle.part-*
  tar -C "$stage" -cf - node "${with_npm[@]}" tree.tar | xz -T0 -9 | split -b "${mib}M" -d - .gpu-carry/node-bundle.part-
  rm -rf "$stage"
  ls -la .gpu-carry/node-bundle.part-* | awk '{print $5, $9}'
  (cd .gpu-carry && sha256sum node-bundle.part-* > node-bundle.sha256)
}

stash() {
  mkdir -p /tmp/vt-parts
  cp "$root"/.gpu-carry/node-bundle.* /tmp/vt-parts/ 2>/dev/null || true
  ls /tmp/vt-parts
}

use() {
  stash >/dev/null
  (cd /tmp/vt-parts && sha256sum -c --quiet node-bundle.sha256) || { echo "gpu-node: parts missing or damaged"; return 1; }
  rm -rf /tmp/vt-node && mkdir -p /tmp/vt-node
  cat /tmp/vt-parts/node-bundle.part-* | xz -dc | tar -C /tmp/vt-node -xf -
  tar -C "$root" -xf /tmp/vt-node/tree.tar
  if [ -d /tmp/vt-node/npm ]; then  # VT_WITH_NPM: node, npm and npx together in /tmp/vt-node/bin
    mkdir -p /tmp/vt-node/bin
    ln -sf /tmp/vt-node/node /tmp/vt-node/bin/node
    ln -sf /tmp/vt-node/npm/bin/npm-cli.js /tmp/vt-node/bin/npm
    ln -sf /tmp/vt-node/npm/bin/npx-cli.js /tmp/vt-node/bin/npx
  fi
  /tmp/vt-node/node --version
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  stash) stash ;;
  use) use ;;
  *) echo "usage: scripts/gpu-node.sh pack [PATH...] | stash | use"; exit 2 ;;
esac

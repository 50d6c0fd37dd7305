// npm's install step for this package. With a prebuilt binary for this platform (prebuilds/linux-x64/ or
// prebuilds/linux-arm64/, shipped in the package) or a build already made here, there is nothing to do and
// nothing is compiled: no compiler, make, python3 or CUDA toolkit is needed. Otherwise (another platform, a git
// checkout, or `npm install --build-from-source`) it builds from source:
//   1. the CUDA kernels for this machine's GPUs when nvcc is there (scripts/build-cuda.mjs --local; the
//      VTENGINE_CUDA_ARCH variable picks other targets), else an empty kernel table: the CPU backend alone,
//      said in the install log;
//   2. the addon, with node-gyp (npm's own, as node-gyp-build does).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);

function fromSource() {
  const flag = process.env.npm_config_build_from_source;
  return flag === 'true' || flag === '1' || flag === 'vtengine';
}

function existingBinary() {
  try {
    return require('node-gyp-build').path(root);
  } catch {
    return null;
  }
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.error) {
    console.error(`vtengine: could not run ${cmd}: ${r.error.message}`);
    process.exit(1);
  }
  if (r.status !== 0) process.exit(r.status ?? 1);
}

// node-gyp as npm runs it for packages with a binding.gyp: npm's bundled copy, else ours (a checkout's
// devDependency), else one on PATH.
function nodeGyp() {
  if (process.env.npm_config_node_gyp) return [process.execPath, [process.env.npm_config_node_gyp]];
  try {
    return [process.execPath, [require.resolve('node-gyp/bin/node-gyp.js')]];
  } catch {
    return ['node-gyp', []];
  }
}

const binary = fromSource() ? null : existingBinary();
if (binary) {
  console.log(`vtengine: using ${binary.includes('/prebuilds/') ? 'the prebuilt binary' : 'the local build'} ${binary}`);
  process.exit(0);
}
console.log(`vtengine: no prebuilt binary for ${process.platform}-${process.arch}${fromSource() ? ' used (--build-from-source)' : ''}; building from source`);
run(process.execPath, ['scripts/build-cuda.mjs', '--local']);
const [cmd, pre] = nodeGyp();
run(cmd, [...pre, 'rebuild', '-j', 'max']);

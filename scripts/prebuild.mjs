// `npm run prebuild`: the release binaries, prebuilds/linux-x64/ and prebuilds/linux-arm64/, made with prebuildify
// (Node-API: one binary per platform for every Node >= 20 and Electron). Each holds the CPU backend (x64: the
// AVX2 / AVX-512 dispatch; arm64: NEON) and the CUDA kernels of every target (scripts/build-cuda.mjs
// --list-targets), compiled once: the fatbins are device code, the same for both hosts. The arm64 host code is
// cross-compiled with Debian's g++-aarch64-linux-gnu. libstdc++ and libgcc are linked in (binding.gyp,
// VTENGINE_STATIC_RUNTIME) and the symbols stripped; scripts/check-prebuilds.mjs then checks what each binary
// asks of the system (glibc <= 2.34, no libstdc++) and prints their sizes.
//
//   node scripts/prebuild.mjs                  both platforms, all CUDA targets
//   node scripts/prebuild.mjs --arch x64       one platform (repeat or comma-separate for more)
//   node scripts/prebuild.mjs --no-cuda        CPU-only binaries (an empty kernel table), e.g. for a quick check
//   options: --jobs N (parallel compiles; default: CPU count)
//
// The binaries are built in build/prebuild/ (a copy of the native sources), so the development build in
// build/Release is left alone: node-gyp-build prefers a local build over prebuilds, and a clobbered build/Release
// holding an arm64 binary would break every test on this machine.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));
const stage = join(root, 'build/prebuild');

// Per target platform: the compilers and strip of the cross toolchain (none: the host's).
const TOOLCHAINS = {
  x64: { host: 'x64', env: {}, strip: 'strip' },
  arm64: {
    host: 'arm64',
    env: { CC: 'aarch64-linux-gnu-gcc', CXX: 'aarch64-linux-gnu-g++', LINK: 'aarch64-linux-gnu-g++' },
    strip: 'aarch64-linux-gnu-strip',
    apt: 'g++-aarch64-linux-gnu',
  },
};

const { values: opts } = parseArgs({
  options: {
    arch: { type: 'string', multiple: true },
    'no-cuda': { type: 'boolean', default: false },
    jobs: { type: 'string', default: String(availableParallelism()) },
  },
});
const arches = (opts.arch ?? ['x64', 'arm64']).flatMap((a) => a.split(','));
for (const a of arches) {
  if (!TOOLCHAINS[a]) fail(`unknown --arch ${a} (x64 or arm64)`);
}

function fail(message) {
  console.error(`prebuild: ${message}`);
  process.exit(1);
}

function run(cmd, args, env = {}, cwd = root) {
  console.log(`$ ${[...Object.entries(env).map(([k, v]) => `${k}=${v}`), cmd, ...args].join(' ')}`);
  const r = spawnSync(cmd, args, { cwd, stdio: 'inherit', env: { ...process.env, ...env } });
  if (r.error) fail(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) fail(`${cmd} exited with ${r.status ?? r.signal}`);
}

function have(cmd) {
  try {
    execFileSync(cmd, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

for (const a of arches) {
  const t = TOOLCHAINS[a];
  if (t.env.CXX && !have(t.env.CXX)) fail(`${t.env.CXX} not found: install Debian's ${t.apt} to cross-compile for ${a}`);
}

const t0 = Date.now();
const seconds = () => `${((Date.now() - t0) / 1000).toFixed(0)} s`;

// 1. The kernels, once. A release build: every target plus PTX, without the experiments' kernels.
run(process.execPath, ['scripts/build-cuda.mjs', '--jobs', opts.jobs, ...(opts['no-cuda'] ? ['--no-cuda'] : [])]);
console.log(`prebuild: kernels ready at ${seconds()}`);

// 2. The sources node-gyp compiles, copied to the stage (with the .inc just written); node_modules linked for
//    node-addon-api's headers.
rmSync(stage, { recursive: true, force: true });
mkdirSync(join(stage, 'scripts'), { recursive: true });
for (const p of ['binding.gyp', 'package.json', 'binding', 'cuda/include', 'cuda/src', 'third_party', 'scripts/native-sources.mjs']) {
  cpSync(join(root, p), join(stage, p), { recursive: true });
}
symlinkSync(join(root, 'node_modules'), join(stage, 'node_modules'));

// 3. One prebuildify run per platform. --napi tags the binary `node.napi.node`, which node-gyp-build loads on
//    every Node-API runtime (Node >= 20, Electron); it is built against the running Node's headers (its own
//    include/node, as node-gyp finds them for a local build), so nothing is downloaded. Left alone, prebuildify
//    would ask for the newest Node's headers from nodejs.org.
const nodedir = join(process.execPath, '../..');
const headers = existsSync(join(nodedir, 'include/node/node_api.h')) ? { npm_config_nodedir: nodedir } : {};
for (const a of arches) {
  const t = TOOLCHAINS[a];
  rmSync(join(stage, 'build'), { recursive: true, force: true });
  run(process.execPath, [join(root, 'node_modules/prebuildify/bin.js'), '--napi', '--strip', '--strip-bin', t.strip,
    '--arch', a, '--target', `node@${process.versions.node}`, '--cwd', stage],
  { ...t.env, ...headers, VTENGINE_STATIC_RUNTIME: '1', JOBS: opts.jobs });
  const from = join(stage, 'prebuilds', `linux-${a}`);
  const to = join(root, 'prebuilds', `linux-${a}`);
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true });
  for (const f of readdirSync(from)) cpSync(join(from, f), join(to, f));
  console.log(`prebuild: linux-${a} ready at ${seconds()}`);
}

// 4. What the binaries ask of the system they land on.
run(process.execPath, ['scripts/check-prebuilds.mjs']);
console.log(`prebuild: done in ${seconds()}${existsSync(join(root, 'build/Release')) ? '' : ' (no local build: node-gyp-build will load these)'}`);

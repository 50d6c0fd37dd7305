// Compiles the CUDA kernels (cuda/src/backend/cuda/*.cu) with nvcc, one fatbin per op family, and embeds them
// in the native build as cuda/src/backend/cuda/kernels_fatbin.inc (generated, git-ignored), which
// kernels_fatbin.cpp includes. Each fatbin holds cubins for every target GPU plus compute_80 PTX, so one
// binary runs on Ampere and newer with only the NVIDIA driver installed (see ../shared/DESIGN.md).
//
//   node scripts/build-cuda.mjs                  all targets (release / prebuilt builds)
//   node scripts/build-cuda.mjs --arch sm_90a    one target, for development (repeat --arch for more)
//   node scripts/build-cuda.mjs --no-cuda        an empty kernel table (a CPU-only build), as without nvcc
//   node scripts/build-cuda.mjs --local          a source install's build (scripts/install.mjs): the targets in
//                                                VTENGINE_CUDA_ARCH (e.g. sm_90a,sm_120, or "all"), else those of
//                                                the GPUs nvidia-smi lists; none (no GPU): an empty kernel table
//   options: --jobs N (parallel nvcc runs; default: CPU count), --force (ignore up-to-date checks),
//            --keep-going (report every failing file), --list-targets, --experiments (also the kernels of
//            experiments that are off by default, e.g. bench/cuda-sync.cpp's kernels: development and GPU
//            check builds carry them, release builds do not, which keeps the shipped fatbin small)
//   env: NVCC (path of nvcc; default: nvcc on PATH, else /usr/local/cuda/bin/nvcc)
//
// Without nvcc it writes an empty kernel table and exits 0: the addon still builds and runs on the CPU, and
// cuda_available() says "this build has no CUDA kernels". A fatbin is rebuilt when it is older than its .cu,
// than any .cuh of the folder, or when the nvcc command changes; the .inc is rewritten only when its
// content changes, so an up-to-date run costs no native rebuild.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const srcDir = join(root, 'cuda/src/backend/cuda');
const outDir = join(root, 'build/cuda');
const incPath = join(srcDir, 'kernels_fatbin.inc');

// (virtual arch, real arch): sm_90a and sm_100a need their own "a" virtual arch to allow arch-specific
// instructions (wgmma, tcgen05); the -gencode form is the one that works for them with nvcc 13.0.
const ALL_TARGETS = ['sm_80', 'sm_86', 'sm_89', 'sm_90a', 'sm_100a', 'sm_110', 'sm_120', 'sm_121'];
const PTX = 'compute_80';  // JIT fallback for GPUs newer than every cubin

function parseArgs(argv) {
  const o = { arch: [], jobs: availableParallelism(), force: false, keepGoing: false, noCuda: false, experiments: false };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--arch') o.arch.push(...argv[++i].split(','));
    else if (a.startsWith('--arch=')) o.arch.push(...a.slice(7).split(','));
    else if (a === '--jobs') o.jobs = Number(argv[++i]);
    else if (a === '--force') o.force = true;
    else if (a === '--keep-going') o.keepGoing = true;
    else if (a === '--no-cuda') o.noCuda = true;
    else if (a === '--experiments') o.experiments = true;
    else if (a === '--local') o.local = true;
    else if (a === '--list-targets') { console.log(ALL_TARGETS.join(' ') + ` + ${PTX} PTX`); process.exit(0); }
    else { console.error(`build-cuda: unknown argument ${a}`); process.exit(2); }
  }
  if (!(o.jobs >= 1)) o.jobs = 1;
  return o;
}

function gencodes(targets, withPtx) {
  const flags = targets.map((sm) => `-gencode=arch=${sm.replace('sm_', 'compute_')},code=${sm}`);
  if (withPtx) flags.push(`-gencode=arch=${PTX},code=${PTX}`);
  return flags;
}

function findNvcc() {
  const candidates = [process.env.NVCC, 'nvcc', '/usr/local/cuda/bin/nvcc'].filter(Boolean);
  for (const c of candidates) {
    try {
      const v = execFileSync(c, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      return { path: c, version: (v.match(/release ([\d.]+)/) || [])[1] || '?' };
    } catch { /* try the next */ }
  }
  return null;
}

function writeIfChanged(path, text) {
  if (existsSync(path) && readFileSync(path, 'utf8') === text) return false;
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
  return true;
}

// A byte as it sits in a C string literal: printable ASCII as itself, everything else as a 3-digit octal
// escape (which never swallows a following digit). g++ reads a literal like this ~10x faster than a
// brace list of numbers, which matters for megabytes of fatbin.
const ESC = Array.from({ length: 256 }, (_, b) =>
  b >= 32 && b < 127 && b !== 34 && b !== 92 && b !== 63 ? String.fromCharCode(b) : '\\' + b.toString(8).padStart(3, '0'));

// The .inc: one 64-byte aligned array per family and the table kernel_images.h declares.
function renderInc(images, note) {
  const lines = [`// Generated by scripts/build-cuda.mjs (${note}). Do not edit; git-ignored.`, 'namespace vt::cuda {', ''];
  for (const { name, bytes } of images) {
    // size + 1: the literal's terminating NUL, which is not part of the image
    lines.push(`alignas(64) static const unsigned char fatbin_${name}[${bytes.length + 1}] =`);
    for (let i = 0; i < bytes.length; i += 64) {
      let s = '';
      for (const b of bytes.subarray(i, i + 64)) s += ESC[b];
      lines.push(`  "${s}"`);
    }
    lines.push(';', '');
  }
  const rows = images.map(({ name, bytes }) => `  {"${name}", fatbin_${name}, ${bytes.length}},`);
  lines.push(`const KernelImage kernel_images[${Math.max(1, images.length)}] = {`);
  lines.push(...(rows.length ? rows : ['  {nullptr, nullptr, 0},']), '};');
  lines.push(`const size_t kernel_image_count = ${images.length};`, '', '}  // namespace vt::cuda', '');
  return lines.join('\n');
}

function run(cmd, args) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', (e) => resolve({ code: -1, out: out + e.message }));
    child.on('close', (code) => resolve({ code, out }));
  });
}

// The cubin target for a compute capability as nvidia-smi prints it ("9.0" -> sm_90a): Hopper and Blackwell
// datacenter parts get their "a" target, whose wgmma / tcgen05 kernels the portable one lacks.
function targetForCapability(cap) {
  const m = /^(\d+)\.(\d+)$/.exec(cap.trim());
  if (!m) return null;
  const sm = `sm_${m[1]}${m[2]}`;
  return m[1] === '9' || m[1] === '10' ? `${sm}a` : sm;
}

// --local: what a source install builds for. VTENGINE_CUDA_ARCH wins; else the GPUs of this machine.
function localTargets() {
  const env = (process.env.VTENGINE_CUDA_ARCH ?? '').trim();
  if (env === 'all') return { targets: [], why: 'VTENGINE_CUDA_ARCH=all' };
  if (env) return { targets: env.split(',').map((a) => a.trim()).filter(Boolean), why: 'VTENGINE_CUDA_ARCH' };
  let caps = [];
  try {
    caps = execFileSync('nvidia-smi', ['--query-gpu=compute_cap', '--format=csv,noheader'],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter((l) => l.trim());
  } catch { /* no driver, no GPU */ }
  const targets = [...new Set(caps.map(targetForCapability).filter(Boolean))];
  return { targets, why: targets.length ? `the GPUs of this machine (compute capability ${caps.map((c) => c.trim()).join(', ')})` : null };
}

const opts = parseArgs(process.argv.slice(2));
const t0 = Date.now();
if (opts.local && !opts.noCuda) {
  const { targets, why } = localTargets();
  if (!why) {
    opts.noCuda = true;
    opts.noCudaWhy = 'no NVIDIA GPU found by nvidia-smi (set VTENGINE_CUDA_ARCH=sm_90a, or =all, to build kernels anyway)';
  } else {
    opts.arch.push(...targets);
    console.log(`build-cuda: kernels for ${targets.length ? targets.join(' ') : 'all targets'} (${why})`);
  }
}
for (const a of opts.arch) if (!/^sm_\d+a?$/.test(a)) { console.error(`build-cuda: bad target ${a} (e.g. sm_90a)`); process.exit(2); }
const nvcc = opts.noCuda ? null : findNvcc();
if (!nvcc) {
  const why = opts.noCudaWhy ?? (opts.noCuda ? '--no-cuda' : 'nvcc not found (set NVCC=...)');
  const changed = writeIfChanged(incPath, renderInc([], `${why}: no kernels`));
  console.log(`build-cuda: ${why}; wrote an empty kernel table${changed ? '' : ' (unchanged)'}; ` +
              'the build will run on the CPU only');
  process.exit(0);
}

const targets = opts.arch.length ? opts.arch : ALL_TARGETS;
const full = !opts.arch.length;
// --compress-mode=size: the driver (13.0+, which these kernels need anyway) inflates each image at module load;
// the binary shrinks ~8x (all targets: 43 MB -> ~5 MB; bench/RESULTS.md "Prebuilt binaries").
const flags = ['-std=c++17', '-O3', '-fatbin', '--threads', '1', '--compress-mode=size', '-Xptxas=-warn-spills',
               ...gencodes(targets, full),
               ...(opts.experiments ? ['-DVT_CUDA_EXPERIMENTS=1'] : [])];
const sources = readdirSync(srcDir).filter((f) => f.endsWith('.cu')).sort();
// Every header the kernels include, followed from the .cu files through their quoted #includes (the .cuh files,
// and host headers they share such as sample_rows.h and what it includes), so an edit of any rebuilds them.
function includedHeaders() {
  const seen = new Set();
  const visit = (file) => {
    for (const m of readFileSync(file, 'utf8').matchAll(/^\s*#\s*include\s+"([^"]+)"/gm)) {
      const dep = join(dirname(file), m[1]);
      if (!seen.has(dep) && existsSync(dep)) {
        seen.add(dep);
        visit(dep);
      }
    }
  };
  for (const f of readdirSync(srcDir).filter((f) => f.endsWith('.cu'))) visit(join(srcDir, f));
  return [...seen];
}
const headers = includedHeaders();
const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : -Infinity);
const newestHeader = Math.max(-Infinity, ...headers.map(mtime));
mkdirSync(outDir, { recursive: true });

// nvcc's version and the flags are part of each fatbin's identity: a change of either rebuilds everything.
const stampPath = join(outDir, 'flags.txt');
const stampNow = [`nvcc ${nvcc.version}`, ...flags].join(' ');
const stale = opts.force || !existsSync(stampPath) || readFileSync(stampPath, 'utf8') !== stampNow;

const jobs = sources.map((f) => ({ name: basename(f, '.cu'), src: join(srcDir, f), out: join(outDir, basename(f, '.cu') + '.fatbin') }));
const todo = jobs.filter((j) => stale || mtime(j.out) <= Math.max(mtime(j.src), newestHeader));
console.log(`build-cuda: nvcc ${nvcc.version}, ${full ? 'all targets' : 'dev targets'} ${targets.join(' ')}` +
            `${full ? ` + ${PTX} PTX` : ''}; ${todo.length} of ${jobs.length} files to compile, ${opts.jobs} at a time`);

let failed = 0, next = 0;
async function lane() {
  while (next < todo.length && (opts.keepGoing || !failed)) {
    const j = todo[next++];
    const t = Date.now();
    const r = await run(nvcc.path, [...flags, '-o', j.out, j.src]);
    const secs = ((Date.now() - t) / 1000).toFixed(1);
    if (r.code !== 0) {
      failed++;
      console.log(`--- FAILED ${relative(root, j.src)} (${secs} s)\n${r.out}`);
    } else {
      console.log(`  ${relative(root, j.src)} ${secs} s${r.out.trim() ? `\n${r.out.trim()}` : ''}`);
    }
  }
}
await Promise.all(Array.from({ length: Math.min(opts.jobs, todo.length) }, lane));
if (failed) {
  console.log(`build-cuda: ${failed} file(s) failed; ${relative(root, incPath)} left as it was`);
  process.exit(1);
}
writeFileSync(stampPath, stampNow);

const images = jobs.map((j) => ({ name: j.name, bytes: readFileSync(j.out) }));
const total = images.reduce((s, i) => s + i.bytes.length, 0);
const changed = writeIfChanged(incPath, renderInc(images, `nvcc ${nvcc.version}, ${targets.join(' ')}${full ? ` + ${PTX} PTX` : ''}`));
console.log(`build-cuda: ${images.length} fatbins, ${(total / 1024).toFixed(0)} KiB; ${relative(root, incPath)} ` +
            `${changed ? 'written' : 'unchanged'}; ${((Date.now() - t0) / 1000).toFixed(1)} s`);

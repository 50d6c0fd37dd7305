// Builds and runs every native test (test/native/test_*.cpp): each is a standalone C++ program (its own
// main) linked against the engine's sources, which exits non-zero on failure. Needs only g++ and node.
//
//   node scripts/native-tests.mjs [name-filter ...]     e.g. `node scripts/native-tests.mjs cpu_ops`
//
// The engine sources (those scripts/native-sources.mjs lists, or VT_NATIVE_SOURCES="a.cpp b.cpp" to try a
// subset while other files are mid-edit) are compiled once into test/native/build/obj and archived into
// libvtengine.a; each test links against the archive, so it pulls in only the objects it uses. An object is
// rebuilt when its source or any header it included (as g++ -MMD recorded) is newer, or the flags changed.
// A source that fails to compile fails the run, but the tests that do not need it still build and run.
// CXX overrides the compiler. Exit code: 0 only if everything built and every test passed.
//
// Other builds of the same tests (scripts/sanitize.sh's ASan + UBSan build) keep their objects apart, so that
// objects built with different flags never meet in one archive or link:
//   VT_NATIVE_BUILD_DIR  build folder, relative to the repository root (default test/native/build)
//   VT_NATIVE_CXXFLAGS   extra compile flags, after the defaults (split on spaces)
//   VT_NATIVE_LDFLAGS    extra link flags (split on spaces)
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const buildDir = resolve(root, process.env.VT_NATIVE_BUILD_DIR || 'test/native/build');
const objDir = join(buildDir, 'obj');
const cxx = process.env.CXX || 'g++';
const envFlags = (name) => (process.env[name] ?? '').split(/\s+/).filter(Boolean);
const cflags = [
  ...['-std=c++20', '-O2', '-g', '-pthread', '-Icuda/include', '-Icuda/src', '-Ithird_party/nlohmann/include'],
  ...envFlags('VT_NATIVE_CXXFLAGS'),
];
const ldflags = ['-pthread', '-ldl', ...envFlags('VT_NATIVE_LDFLAGS')];
const filters = process.argv.slice(2);
const timeoutMs = 1000 * Number(process.env.VT_NATIVE_TEST_TIMEOUT_S || 300);  // per test program

function engineSources() {
  const override = process.env.VT_NATIVE_SOURCES;
  const list =
    override ?? execFileSync(process.execPath, [join(root, 'scripts/native-sources.mjs')], {
      encoding: 'utf8',
    });
  return list.split(/\s+/).filter(Boolean);
}

const mtime = (p) => (existsSync(p) ? statSync(p).mtimeMs : -Infinity);

// The files an object was built from, as g++ -MMD recorded them next to it (source first, then headers).
function depsOf(obj) {
  const d = obj.replace(/\.o$/, '.d');
  if (!existsSync(d)) return null;
  const text = readFileSync(d, 'utf8').replace(/\\\n/g, ' ');
  return text.slice(text.indexOf(':') + 1).split(/\s+/).filter(Boolean).map((f) => resolve(root, f));
}

// Flags are part of every object's identity: a change of compiler or flags rebuilds all.
mkdirSync(objDir, { recursive: true });
const flagsFile = join(buildDir, 'flags.txt');
const flagsNow = [cxx, ...cflags].join(' ');
if (!existsSync(flagsFile) || readFileSync(flagsFile, 'utf8') !== flagsNow) {
  rmSync(objDir, { recursive: true, force: true });
  mkdirSync(objDir, { recursive: true });
  writeFileSync(flagsFile, flagsNow);
}

function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, ...opts });
    let out = '';
    child.stdout?.on('data', (d) => { out += d; });
    child.stderr?.on('data', (d) => { out += d; });
    child.on('error', (e) => resolve({ code: -1, out: `${out}${e.message}\n` }));
    child.on('close', (code, signal) => resolve({ code: signal ? `signal ${signal}` : code, out }));
  });
}

// Runs job(item) for every item, at most `width` at a time.
async function pool(items, width, job) {
  const results = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(width, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await job(items[i]);
    }
  });
  await Promise.all(lanes);
  return results;
}

async function compile(src, obj) {
  const deps = depsOf(obj);
  const built = mtime(obj);
  if (deps && deps.every((f) => existsSync(f) && mtime(f) < built)) return { ok: true, fresh: false };
  mkdirSync(dirname(obj), { recursive: true });
  const r = await run(cxx, [...cflags, '-MMD', '-MF', obj.replace(/\.o$/, '.d'), '-c', src, '-o', obj]);
  if (r.out.trim()) process.stdout.write(`--- ${src}\n${r.out}`);
  if (r.code !== 0) rmSync(obj, { force: true });
  return { ok: r.code === 0, fresh: true };
}

const t0 = Date.now();
const failures = [];
const width = Math.max(1, availableParallelism());

// 1. Engine sources → objects → one archive.
const sources = engineSources();
// Object path mirrors the source path (a `..` in an override stays inside obj/).
const objectOf = (src) => join(objDir, src.replace(/\.\.\//g, '__/').replace(/\.cpp$/, '.o'));
const objects = sources.map(objectOf);
const built = await pool(sources, width, (s) => compile(s, objectOf(s)));
const rebuilt = built.filter((b) => b.fresh).length;
sources.forEach((s, i) => { if (!built[i].ok) failures.push(`build ${s}`); });
const archive = join(buildDir, 'libvtengine.a');
rmSync(archive, { force: true });  // recreated whole: a deleted source must not linger as a stale member
const good = objects.filter((_, i) => built[i].ok);
if (good.length) {
  const r = await run('ar', ['rcs', archive, ...good.map((o) => relative(root, o))]);
  if (r.code !== 0) { process.stdout.write(r.out); failures.push('archive engine objects'); }
}
const secs = ((Date.now() - t0) / 1000).toFixed(1);
console.log(`native: ${sources.length} engine sources (${rebuilt} compiled) in ${secs} s`);

// 2. Tests: compile, link, run one after another (each may use every core).
const testDir = join(root, 'test/native');
const tests = readdirSync(testDir)
  .filter((f) => /^test_.*\.cpp$/.test(f))
  .filter((f) => !filters.length || filters.some((x) => f.includes(x)))
  .sort();
const testObjs = await pool(tests, width, (f) =>
  compile(`test/native/${f}`, join(objDir, 'test', f.replace(/\.cpp$/, '.o'))),
);
// A test may have companion sources, test/native/<name without test_>/*.cpp, linked into its program (the CUDA
// op checks are split by op family that way).
const companionsOf = (name) => {
  const dir = join(testDir, name.replace(/^test_/, ''));
  return existsSync(dir) && statSync(dir).isDirectory()
    ? readdirSync(dir).filter((f) => f.endsWith('.cpp')).sort().map((f) => `test/native/${relative(testDir, join(dir, f))}`)
    : [];
};
const companions = tests.flatMap((f) => companionsOf(f.replace(/\.cpp$/, '')));
const companionObjs = await pool(companions, width, (src) => compile(src, join(objDir, src.replace(/\.cpp$/, '.o'))));
companions.forEach((s, i) => { if (!companionObjs[i].ok) failures.push(`build ${s}`); });

const summary = [];
for (const [i, f] of tests.entries()) {
  const name = f.replace(/\.cpp$/, '');
  const exe = join(buildDir, name);
  if (!testObjs[i].ok) { summary.push([name, 'BUILD FAILED', 0]); continue; }
  const libs = existsSync(archive) ? [archive] : [];
  const extra = companionsOf(name).map((src) => join(objDir, src.replace(/\.cpp$/, '.o')));
  const link = await run(cxx, [join(objDir, 'test', `${name}.o`), ...extra, ...libs, ...ldflags, '-o', exe]);
  if (link.code !== 0) {
    process.stdout.write(`--- link ${name}\n${link.out}`);
    summary.push([name, 'LINK FAILED', 0]);
    continue;
  }
  console.log(`=== ${name}`);
  const start = Date.now();
  const r = await run(exe, [], { stdio: ['ignore', 'inherit', 'inherit'], timeout: timeoutMs });
  summary.push([name, r.code === 0 ? 'PASS' : `FAIL (exit ${r.code})`, (Date.now() - start) / 1000]);
}

console.log('\nnative test summary:');
for (const [name, status, secs] of summary) {
  console.log(`  ${status.padEnd(16)} ${name}${secs ? ` (${secs.toFixed(1)} s)` : ''}`);
  if (status !== 'PASS') failures.push(name);
}
for (const f of failures.filter((f) => f.startsWith('build ') || f.startsWith('archive'))) {
  console.log(`  FAILED           ${f}`);
}
const passed = summary.filter(([, s]) => s === 'PASS').length;
if (!tests.length) console.log('  (no test matched)');
console.log(`native: ${passed} passed, ${failures.length} failed`);
process.exitCode = failures.length || !tests.length ? 1 : 0;

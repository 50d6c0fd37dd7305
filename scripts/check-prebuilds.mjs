// What a prebuilt binary asks of the machine it lands on, read from the ELF file itself:
// - the newest glibc symbol version it imports (`objdump -T`): at most GLIBC_2.34, so it loads on Ubuntu 22.04,
//   RHEL 9 and Debian 12 and newer (a binary built on a newer glibc can pick up e.g. _dl_find_object@GLIBC_2.35);
// - the shared libraries it needs (`readelf -d`): glibc's own and nothing of the compiler (libstdc++ and libgcc
//   are linked in), so a machine with Node alone can load it;
// - its machine (`readelf -h`), which must match the folder it sits in.
//
//   node scripts/check-prebuilds.mjs [folder ...]     default: every prebuilds/linux-*/ of the package
// Prints one line per binary and exits 1 when one breaks a rule. test/package/prebuild-binaries.test.ts runs the
// same checks.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The newest glibc a prebuild may need (Ubuntu 22.04 has 2.35, RHEL 9 has 2.34). */
export const MAX_GLIBC = [2, 34];

/** Libraries a prebuild may need: glibc's parts and the dynamic loader. */
const ALLOWED_NEEDED = /^(libc|libm|libdl|libpthread|librt|ld-linux-(x86-64|aarch64))\.so(\.\d+)*$/;

/** The ELF machine of each prebuild folder, as readelf names it. */
const MACHINE = { 'linux-x64': 'Advanced Micro Devices X86-64', 'linux-arm64': 'AArch64' };

function tool(name, args) {
  return execFileSync(name, args, { encoding: 'utf8', maxBuffer: 256 << 20, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** The objdump that reads this machine's files: the host's for its own arch, the cross one's for arm64. */
function objdumpFor(machine) {
  if (machine === 'AArch64' && process.arch !== 'arm64') return 'aarch64-linux-gnu-objdump';
  return 'objdump';
}

/** Compares two versions given as number arrays. */
function compareVersions(a, b) {
  for (let i = 0; i < Math.max(a.length, b.length); ++i) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The facts of one ELF shared object: machine, NEEDED libraries, and the glibc versions of its undefined
 * (imported) dynamic symbols, newest first, each with the symbols that need it.
 */
export function elfRequirements(file) {
  const machine = (tool('readelf', ['-h', file]).match(/Machine:\s+(.+)/) ?? [])[1]?.trim() ?? '?';
  const needed = [...tool('readelf', ['-d', '-W', file]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  const byVersion = new Map();
  // objdump -T: "0000000000000000      DF *UND*  0000000000000000 (GLIBC_2.14) memcpy" — imports are *UND*.
  for (const line of tool(objdumpFor(machine), ['-T', file]).split('\n')) {
    const m = line.match(/\*UND\*\s+\S+\s+\(?GLIBC_([\d.]+)\)?\s+(\S+)/);
    if (!m) continue;
    const symbols = byVersion.get(m[1]) ?? [];
    symbols.push(m[2]);
    byVersion.set(m[1], symbols);
  }
  const glibc = [...byVersion.entries()]
    .map(([v, symbols]) => ({ version: v.split('.').map(Number), symbols }))
    .sort((a, b) => compareVersions(b.version, a.version));
  return { machine, needed, glibc, bytes: statSync(file).size };
}

/** The rules a prebuild in `folder` (e.g. prebuilds/linux-arm64) breaks, as sentences; [] when none. */
export function prebuildProblems(file, folder) {
  const r = elfRequirements(file);
  const problems = [];
  const expected = MACHINE[basename(folder)];
  if (expected && r.machine !== expected) problems.push(`is built for ${r.machine}, not ${expected}`);
  const newest = r.glibc[0];
  if (!newest) problems.push('imports no versioned glibc symbol (not a glibc build?)');
  for (const g of r.glibc) {
    if (compareVersions(g.version, MAX_GLIBC) > 0) {
      problems.push(`needs GLIBC_${g.version.join('.')} (> ${MAX_GLIBC.join('.')}) for ${g.symbols.join(', ')}`);
    }
  }
  const extra = r.needed.filter((n) => !ALLOWED_NEEDED.test(n));
  if (extra.length) problems.push(`links against ${extra.join(', ')} (only glibc's libraries are allowed)`);
  return { ...r, problems };
}

/** Every binary under prebuilds/<platform>/ of the package at `root`. */
export function listPrebuilds(root) {
  const dir = join(root, 'prebuilds');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((d) => d.startsWith('linux-')).flatMap((d) =>
    readdirSync(join(dir, d)).filter((f) => f.endsWith('.node')).map((f) => ({ folder: join(dir, d), file: join(dir, d, f) })));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const folders = process.argv.slice(2);
  const binaries = folders.length
    ? folders.flatMap((d) => readdirSync(d).filter((f) => f.endsWith('.node')).map((f) => ({ folder: d, file: join(d, f) })))
    : listPrebuilds(root);
  if (!binaries.length) {
    console.error('check-prebuilds: no prebuilt binary found (run npm run prebuild)');
    process.exit(1);
  }
  let bad = 0;
  for (const { folder, file } of binaries) {
    const r = prebuildProblems(file, folder);
    const newest = r.glibc[0] ? `GLIBC_${r.glibc[0].version.join('.')}` : 'none';
    console.log(`${file}: ${(r.bytes / 2 ** 20).toFixed(1)} MiB, ${r.machine}, newest glibc ${newest}, needs ${r.needed.join(' ')}`);
    for (const p of r.problems) console.log(`  PROBLEM: ${p}`);
    bad += r.problems.length ? 1 : 0;
  }
  process.exit(bad ? 1 : 0);
}

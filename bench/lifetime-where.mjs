// Where a process's resident memory is, for bench/lifetimes.mjs --where: the experiments that find what a
// load → generate → dispose cycle leaves behind. Linux and glibc only (procfs; mallinfo2 through koffi).
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import koffi from 'koffi';

const KiB = 1024, MiB = 2 ** 20;
// glibc's non-main arenas live in "heaps": anonymous mappings of HEAP_MAX_SIZE (64 MiB on 64-bit), aligned to it,
// of which the used part is read-write and the rest PROT_NONE. The kernel merges a heap with an adjacent anonymous
// mapping of the same protection, so the split between "arena heaps" and "other" is approximate; their sum is not.
const ARENA_ALIGN = 64n * BigInt(MiB);

const libc = koffi.load('libc.so.6');
const Mallinfo2 = koffi.struct('mallinfo2', {
  arena: 'size_t', ordblks: 'size_t', smblks: 'size_t', hblks: 'size_t', hblkhd: 'size_t',
  usmblks: 'size_t', fsmblks: 'size_t', uordblks: 'size_t', fordblks: 'size_t', keepcost: 'size_t',
});
const mallinfo2 = libc.func('mallinfo2', Mallinfo2, []);
const fopen = libc.func('void *fopen(const char *path, const char *mode)');
const fclose = libc.func('int fclose(void *f)');
const mallocInfo = libc.func('int malloc_info(int options, void *f)');

/** How many arenas glibc has made (malloc_info's XML has one <heap> per arena). */
function arenas() {
  const path = join(tmpdir(), `vt-malloc-info-${process.pid}.xml`);
  const f = fopen(path, 'w');
  mallocInfo(0, f);
  fclose(f);
  const xml = readFileSync(path, 'utf8');
  rmSync(path);
  return (xml.match(/<heap nr="\d+">/g) ?? []).length;
}

/** Resident bytes by kind of mapping, from /proc/self/smaps. */
function residentByKind() {
  const kinds = {};
  let key = null;
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = line.match(/^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/);
    if (head) {
      const [, lo, hi, perms, path] = head;
      const start = BigInt('0x' + lo), bytes = Number(BigInt('0x' + hi) - start);
      if (path.startsWith('/')) key = 'file ' + path.split('/').pop();
      else if (path) key = path;                                    // [heap], [stack], [vdso], ...
      else if (start % ARENA_ALIGN === 0n && perms.startsWith('rw')) key = 'anon: malloc arena heaps';
      else if (bytes > 8 * MiB - 64 * KiB && bytes <= 8 * MiB && perms.startsWith('rw')) key = 'anon: thread stacks (8 MiB)';
      else key = 'anon: other';
      continue;
    }
    const rss = line.match(/^Rss:\s+(\d+) kB/);
    if (rss && key) kinds[key] = (kinds[key] ?? 0) + Number(rss[1]) * KiB;
  }
  return kinds;
}

/** One sample: threads, glibc's heap totals and resident memory by kind. */
export function whereMemoryIs() {
  const m = mallinfo2();
  return {
    threads: readdirSync('/proc/self/task').length,
    arenas: arenas(),
    malloc: { systemBytes: Number(m.arena), mmappedBytes: Number(m.hblkhd), inUseBytes: Number(m.uordblks),
      freeBytes: Number(m.fordblks) },
    v8: { heapTotalBytes: process.memoryUsage().heapTotal },
    residentByKind: residentByKind(),
  };
}

/** Prints what changed between two samples: threads, heap totals, and each kind of mapping that moved by 64 KiB+. */
export function printGrowth(from, to) {
  const mib = (b) => `${b >= 0 ? '+' : ''}${(b / MiB).toFixed(2)} MiB`;
  console.log(`where (second cycle → last): threads ${from.threads} → ${to.threads}, malloc arenas ${from.arenas} → ${to.arenas}`);
  for (const k of Object.keys(to.malloc)) {
    console.log(`  malloc ${k}: ${(from.malloc[k] / MiB).toFixed(2)} → ${(to.malloc[k] / MiB).toFixed(2)} MiB ` +
      `(${mib(to.malloc[k] - from.malloc[k])})`);
  }
  console.log(`  V8 heapTotal: ${mib(to.v8.heapTotalBytes - from.v8.heapTotalBytes)} (part of anon: other)`);
  const keys = new Set([...Object.keys(from.residentByKind), ...Object.keys(to.residentByKind)]);
  const moved = [...keys].map((k) => [k, (to.residentByKind[k] ?? 0) - (from.residentByKind[k] ?? 0)])
    .filter(([, d]) => Math.abs(d) >= 64 * KiB).sort((a, b) => b[1] - a[1]);
  for (const [k, d] of moved) console.log(`  resident ${k}: ${mib(d)} (now ${((to.residentByKind[k] ?? 0) / MiB).toFixed(2)} MiB)`);
}

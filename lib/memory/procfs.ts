/**
 * The process's and the machine's memory from Linux procfs: `/proc/<pid>/smaps_rollup` (or, on kernels before 4.14,
 * the sum of `/proc/<pid>/smaps`) and `/proc/meminfo`. A dozen lines of parsing, so no dependency: the npm packages
 * that read procfs report RSS only (pidusage) or are unmaintained.
 *
 * Every reader returns `{ value }` or `{ value: null, reason }`: a missing procfs (macOS, Windows, a locked-down
 * container) is a fact to report, never an exception.
 * @internal
 * @module
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ProcessMemory, SystemMemory } from './types.js';

/** A figure, or null and why it is not there. @internal */
export type Reading<T> = { value: T; reason?: undefined } | { value: null; reason: string };

/** Where to read: a pid (default `'self'`) under a procfs root (default `/proc`; tests point it elsewhere). @internal */
export interface ProcSource {
  pid?: number | 'self';
  procRoot?: string;
}

/**
 * Sums every `Key:   N kB` line by key. One block (smaps_rollup, meminfo) or one block per mapping (smaps) alike;
 * lines that are not `kB` figures (mapping headers, `VmFlags`, `HugePages_Total: 0`) are skipped.
 * @internal
 */
export function parseKbFields(text: string): Map<string, number> {
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z_()0-9]+):\s+(\d+) kB\s*$/.exec(line);
    if (m) sums.set(m[1]!, (sums.get(m[1]!) ?? 0) + Number(m[2]) * 1024);
  }
  return sums;
}

/**
 * RSS, PSS, USS (Private_Clean + Private_Dirty) and swap from the text of smaps_rollup or smaps.
 * @throws Error when the text has no Rss or Pss figure (not a smaps file).
 * @internal
 */
export function parseSmaps(text: string, source: ProcessMemory['source']): ProcessMemory {
  const f = parseKbFields(text);
  const rss = f.get('Rss'), pss = f.get('Pss');
  if (rss === undefined || pss === undefined) throw new Error('no Rss/Pss lines');
  return {
    rssBytes: rss,
    pssBytes: pss,
    ussBytes: (f.get('Private_Clean') ?? 0) + (f.get('Private_Dirty') ?? 0),
    swapBytes: f.get('Swap') ?? 0,
    // Only smaps_rollup splits PSS by kind (Linux >= 5.4); per-mapping smaps does not.
    pssAnonBytes: f.get('Pss_Anon') ?? null,
    pssFileBytes: f.get('Pss_File') ?? null,
    source,
  };
}

/**
 * MemTotal and MemAvailable from the text of /proc/meminfo.
 * @throws Error when either is missing (MemAvailable needs Linux >= 3.14).
 * @internal
 */
export function parseMeminfo(text: string): SystemMemory {
  const f = parseKbFields(text);
  const total = f.get('MemTotal'), available = f.get('MemAvailable');
  if (total === undefined || available === undefined) throw new Error('no MemTotal/MemAvailable lines');
  return { totalBytes: total, availableBytes: available };
}

function notLinux(): string | undefined {
  return process.platform === 'linux' ? undefined : `procfs is Linux-only; this is ${process.platform}`;
}

function paths(src: ProcSource = {}): { rollup: string; smaps: string; meminfo: string } {
  const root = src.procRoot ?? '/proc';
  const dir = join(root, String(src.pid ?? 'self'));
  return { rollup: join(dir, 'smaps_rollup'), smaps: join(dir, 'smaps'), meminfo: join(root, 'meminfo') };
}

function why(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

type Read = (path: string) => string | Promise<string>;

// One body for the sync reader (the tracker samples on a timer) and the async one (memory()).
function* processMemory(src: ProcSource | undefined): Generator<string, Reading<ProcessMemory>, string | Error> {
  const no = notLinux();
  if (no) return { value: null, reason: no };
  const p = paths(src);
  const rollup = yield p.rollup;
  if (typeof rollup === 'string') {
    try {
      return { value: parseSmaps(rollup, 'smaps_rollup') };
    } catch (err) {
      return { value: null, reason: `${p.rollup}: ${why(err)}` };
    }
  }
  const smaps = yield p.smaps; // kernels before 4.14 have no smaps_rollup
  if (typeof smaps !== 'string') return { value: null, reason: `cannot read ${p.rollup} or ${p.smaps}: ${smaps.message}` };
  try {
    return { value: parseSmaps(smaps, 'smaps') };
  } catch (err) {
    return { value: null, reason: `${p.smaps}: ${why(err)}` };
  }
}

function* systemMemory(src: ProcSource | undefined): Generator<string, Reading<SystemMemory>, string | Error> {
  const no = notLinux();
  if (no) return { value: null, reason: no };
  const { meminfo } = paths(src);
  const text = yield meminfo;
  if (typeof text !== 'string') return { value: null, reason: `cannot read ${meminfo}: ${text.message}` };
  try {
    return { value: parseMeminfo(text) };
  } catch (err) {
    return { value: null, reason: `${meminfo}: ${why(err)}` };
  }
}

function runSync<T>(gen: Generator<string, T, string | Error>): T {
  let step = gen.next();
  while (!step.done) {
    let text: string | Error;
    try {
      text = readFileSync(step.value, 'utf8');
    } catch (err) {
      text = err instanceof Error ? err : new Error(String(err));
    }
    step = gen.next(text);
  }
  return step.value;
}

async function runAsync<T>(gen: Generator<string, T, string | Error>, read: Read): Promise<T> {
  let step = gen.next();
  while (!step.done) {
    let text: string | Error;
    try {
      text = await read(step.value);
    } catch (err) {
      text = err instanceof Error ? err : new Error(String(err));
    }
    step = gen.next(text);
  }
  return step.value;
}

const readText: Read = (path) => readFile(path, 'utf8');

/** This (or another) process's memory, read now, synchronously. @internal */
export function readProcessMemorySync(src?: ProcSource): Reading<ProcessMemory> {
  return runSync(processMemory(src));
}

/** The machine's total and available memory, read now, synchronously. @internal */
export function readSystemMemorySync(src?: ProcSource): Reading<SystemMemory> {
  return runSync(systemMemory(src));
}

/**
 * This process's memory, read off the JS thread: the kernel walks every mapping of the process under its mmap lock
 * to answer, which takes longer the more mappings a process has. @internal
 */
export function readProcessMemory(src?: ProcSource): Promise<Reading<ProcessMemory>> {
  return runAsync(processMemory(src), readText);
}

/** The machine's total and available memory. @internal */
export function readSystemMemory(src?: ProcSource): Promise<Reading<SystemMemory>> {
  return runAsync(systemMemory(src), readText);
}

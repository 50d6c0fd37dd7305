// Lifetimes through the public API (issue 21's acceptance): N load → generate → dispose cycles in one process,
// and what each leaves behind: VmRSS (/proc/self/status, after a full GC) and, on a GPU, this process's device
// bytes as NVML reports them (the engine's own reader, lib/memory/nvml.ts). Acceptance: after the last cycle RSS
// within 8 MiB of where the second cycle left it (the first one pays for one-time setup: code pages, the
// tokenizer's caches, the CUDA driver), and the device bytes back to the byte.
//
//   npm run build:all && node bench/lifetimes.mjs [--device cpu|cuda] [--cycles 15] [--model DIR] [--json FILE]
//                                                 [--trim] [--hold] [--where]
//
// Experiments on where growth comes from (not the product): --trim calls glibc's malloc_trim(0) (through koffi)
// after each dispose, giving free heap memory of every arena back; --hold keeps one more engine loaded throughout
// (the default model), so the CUDA primary context and the driver's per-process state live across the cycles;
// --where records, after each cycle, the process's threads, glibc's heap totals (mallinfo2, all arenas) and its
// resident memory by kind of mapping (/proc/self/smaps: glibc's arena heaps, the brk heap, thread stacks, other
// anonymous memory, each library), and prints what grew between the second cycle and the last.
//
// Runs itself under --expose-gc --max-semi-space-size=1 (V8's young generation held at its initial size, as
// bench/soak.mjs does: with node's defaults it grows and shrinks by up to 25 MiB on its own schedule);
// --node-defaults keeps V8's sizing.
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runUnderPinnedV8 } from './pinned-v8.mjs';

const { values: opt } = parseArgs({
  options: {
    device: { type: 'string', default: 'cpu' },
    cycles: { type: 'string', default: '15' },
    model: { type: 'string' },
    json: { type: 'string' },
    'node-defaults': { type: 'boolean', default: false },
    trim: { type: 'boolean', default: false },
    hold: { type: 'boolean', default: false },
    where: { type: 'boolean', default: false },
  },
});
runUnderPinnedV8(opt['node-defaults']);  // the script's node flags (bench/pinned-v8.mjs)

const { Engine, DEFAULT_MODEL_DIR } = await import('../dist/index.js');
const { nvml } = await import('../dist/memory/nvml.js');
const MiB = 2 ** 20;
const rss = () => Number(readFileSync('/proc/self/status', 'utf8').match(/VmRSS:\s+(\d+)/)[1]) * 1024;
const gpuBytes = () => {
  const r = nvml.processBytes(0, process.pid);
  return r.value ?? null;
};

let mallocTrim = null;
if (opt.trim) {
  const koffi = (await import('koffi')).default;
  mallocTrim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)');
}
const where = opt.where ? await import('./lifetime-where.mjs') : null;  // { whereMemoryIs, printGrowth }
const held = opt.hold ? await Engine.load(DEFAULT_MODEL_DIR, { device: opt.device }) : null;

const cycles = Math.max(2, Number(opt.cycles));
const rows = [];
for (let i = 1; i <= cycles; i++) {
  const engine = await Engine.load(opt.model ?? DEFAULT_MODEL_DIR, { device: opt.device });
  const runs = [1, 2, 3, 4].map((k) => engine.generate({ tokens: [1, 2, 3, k] }, { maxTokens: 64, stopTokenIds: [] }));
  const tokens = (await Promise.all(runs)).reduce((n, r) => n + r.tokenIds.length, 0);
  const loaded = { rss: rss(), gpu: opt.device === 'cuda' ? gpuBytes() : null };
  await engine.dispose();
  globalThis.gc();
  if (mallocTrim) mallocTrim(0);
  const row = { cycle: i, tokens, rssLoadedBytes: loaded.rss, rssBytes: rss(), gpuLoadedBytes: loaded.gpu,
    gpuBytes: opt.device === 'cuda' ? gpuBytes() : null };
  if (where) row.where = where.whereMemoryIs();
  rows.push(row);
  console.log(`cycle ${String(i).padStart(2)}: ${tokens} tokens; RSS ${(row.rssLoadedBytes / MiB).toFixed(1)} MiB loaded, ` +
    `${(row.rssBytes / MiB).toFixed(1)} MiB after dispose` +
    (row.gpuBytes === null ? '' : `; GPU ${row.gpuLoadedBytes} B loaded, ${row.gpuBytes} B after dispose`) +
    (row.where ? `; ${row.where.threads} threads, ${row.where.arenas} malloc arenas` : ''));
}
if (held) await held.dispose();
const second = rows[1], last = rows[rows.length - 1];
if (where) where.printGrowth(second.where, last.where);
const rssGrowth = last.rssBytes - second.rssBytes;
const gpuGrowth = last.gpuBytes === null ? null : last.gpuBytes - second.gpuBytes;
const rssOk = Math.abs(rssGrowth) <= 8 * MiB;
const gpuOk = gpuGrowth === null || gpuGrowth === 0;
console.log(`after ${cycles} cycles: RSS ${rssGrowth >= 0 ? '+' : ''}${(rssGrowth / MiB).toFixed(2)} MiB against cycle 2 ` +
  `(${rssOk ? 'within' : 'NOT within'} 8 MiB)` +
  (gpuGrowth === null ? '' : `; GPU ${gpuGrowth >= 0 ? '+' : ''}${gpuGrowth} B (${gpuOk ? 'back to the byte' : 'NOT back'})`));
if (opt.json) {
  writeFileSync(opt.json, JSON.stringify({ command: [...process.execArgv, ...process.argv.slice(1)].join(' '),
    date: new Date().toISOString(), node: process.version, device: opt.device, rows, rssGrowth, gpuGrowth }, null, 2));
}
process.exit(rssOk && gpuOk ? 0 : 1);

// Issue 22's measure of the Node API against the engine: N concurrent streamed requests through the public API
// (`engine.generate(...)` read with `for await`, as a server would), on the workload bench/cuda-engine.cpp times
// through the C ABI (bench_cuda_engine --only decode): N prompts of 128 ids below 1000 (the same splitmix64 ids),
// 256 new tokens each, greedy, EOS ignored, the engine configured as that benchmark configures it (maxContext 8448,
// maxSeqs 128, maxBatchTokens 8192, a KV pool for 128 such requests). tok/s is the same steady-state figure: tokens
// that arrived after the last request's first token, over the time from then to the last request's end. Meanwhile
// a 1 ms setInterval records how late each tick ran: the event loop's responsiveness (p50/p99/max of the delay).
//
//   npm run build:all && node bench/node-api.mjs --model DIR [--device cuda] [--batches 1,8,32,128] [--runs 3]
//                                                [--json FILE] [--c-abi FILE] [--text] [--defaults]
// VT_BENCH_PACKAGE=DIR: drive an installed package instead of this checkout (bench/package.mjs).
//
// --text: the streams carry text too, as a server's do (each chunk's text read; the streaming detokenizer runs per
// token): the Qwen3 tokenizer (test/fixtures/tokenizers/qwen3) is copied into the checkpoint folder when it has none
// (bench checkpoints are random weights without one; their ids are below 1000, so any vocabulary decodes them).
// --c-abi FILE: bench_cuda_engine's JSON from the same machine and checkpoint; the table gains its column and the
// Node / C ABI ratio. Medians of --runs runs after one warm-up per batch size. --defaults: the engine loaded as a
// user loads it, no options but the device (the KV pool, maxSeqs and maxContext at their defaults).
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { Engine, servedBy } from './package.mjs';
import { ensureTokenizer, kNew, kPrompt, loadDecodeEngine, median, promptIds } from './workload.mjs';

const { values: opt } = parseArgs({
  options: {
    model: { type: 'string' },
    device: { type: 'string', default: 'cuda' },
    batches: { type: 'string', default: '1,8,32,128' },
    runs: { type: 'string', default: '3' },
    json: { type: 'string' },
    'c-abi': { type: 'string' },
    'max-context': { type: 'string' },
    defaults: { type: 'boolean', default: false },  // the engine with default load options (device only)
    text: { type: 'boolean', default: false },  // (a smaller model's limit; the C ABI benchmark's is 8448)
  },
});
if (!opt.model) {
  console.error('usage: node bench/node-api.mjs --model DIR [--device cuda] [--batches 1,8,32,128] [--runs 3]');
  process.exit(64);
}
const batches = opt.batches.split(',').map(Number);
const runs = Math.max(1, Number(opt.runs));
const pct = (v, p) => [...v].sort((a, b) => a - b)[Math.min(v.length - 1, Math.floor((v.length * p) / 100))];

if (opt.text) ensureTokenizer(opt.model);
const engine = await loadDecodeEngine(Engine, opt.model, {
  device: opt.device,
  batches,
  maxContext: opt['max-context'] ? Number(opt['max-context']) : undefined,
  defaults: opt.defaults,
});
{
  // Which binary served, whether cuBLASLt was there to find, and what the idle engine holds right after the load
  // (issue 30: no more device memory than weights + workspaces + the pool's first chunk).
  const mem = await engine.memory(), e = mem.engine, mib = (b) => (b / 2 ** 20).toFixed(0);
  const gpu = mem.gpu?.devices?.[0];
  console.log(servedBy());
  console.log(`idle after load: engine ${mib(e.totalBytes)} MiB (weights ${mib(e.weights.deviceBytes)}, KV pool ` +
    `${mib(e.kvCache.bytes)} in ${e.kvCache.blocksMapped} of ${e.kvCache.blocksTotal} blocks mapped, workspaces ` +
    `${mib(e.workspaceBytes)}, graphs ${e.graphs.bytes === null ? '?' : mib(e.graphs.bytes)}); this process on the GPU ` +
    `${gpu?.processBytes == null ? '? (' + (gpu?.processBytesReason ?? 'no GPU figure') + ')' : mib(gpu.processBytes) + ' MiB'}`);
}

// One batch: N streams read concurrently; per request the time of its first and last token, and every chunk's time.
async function batch(n, maxTokens) {
  const arrivals = [];
  const firsts = [], lasts = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: n }, async (_, r) => {
    const gen = engine.generate({ tokens: promptIds(r, kPrompt) }, { maxTokens, temperature: 0, stopTokenIds: [] });
    let first = 0, last = 0, chars = 0;
    for await (const chunk of gen) {
      const t = performance.now();
      const k = chunk.tokenIds.length;
      chars += chunk.text?.length ?? 0;  // (read, as a consumer would)
      if (!first) first = t;
      last = t;
      arrivals.push([t, k]);
    }
    firsts.push(first), lasts.push(last);
    if (opt.text && chars === 0) throw new Error('--text: the stream carried no text');
  }));
  const lastFirst = Math.max(...firsts), lastFinal = Math.max(...lasts);
  const steady = arrivals.reduce((s, [t, k]) => s + (t > lastFirst ? k : 0), 0);
  return { tokS: (steady / (lastFinal - lastFirst)) * 1e3, e2e: ((n * maxTokens) / (lastFinal - t0)) * 1e3 };
}

// How late a 1 ms interval's ticks run while `work` does.
async function withLoopDelay(work) {
  const delays = [];
  let prev = performance.now();
  const timer = setInterval(() => {
    const t = performance.now();
    delays.push(Math.max(0, t - prev - 1));
    prev = t;
  }, 1);
  try {
    return { result: await work(), delays };
  } finally {
    clearInterval(timer);
  }
}

const cAbi = opt['c-abi'] ? JSON.parse(readFileSync(opt['c-abi'], 'utf8')) : null;
const rows = [];
for (const n of batches) {
  await batch(n, 16);  // warm-up (graph buckets, caches)
  const tok = [], e2e = [], p99 = [], p50 = [], max = [];
  for (let k = 0; k < runs; k++) {
    const { result, delays } = await withLoopDelay(() => batch(n, kNew));
    tok.push(result.tokS), e2e.push(result.e2e);
    p50.push(pct(delays, 50)), p99.push(pct(delays, 99)), max.push(Math.max(...delays));
  }
  const c = cAbi?.decode?.[String(n)]?.tok_s?.median ?? null;
  const row = { batch: n, tokS: median(tok), tokSRuns: tok, e2eTokS: median(e2e), loopDelayMs: { p50: median(p50), p99: median(p99), max: median(max) }, cAbiTokS: c, ratio: c ? median(tok) / c : null };
  rows.push(row);
  console.log(`b${String(n).padEnd(4)} Node API ${row.tokS.toFixed(1).padStart(9)} tok/s` +
    (c ? `  C ABI ${c.toFixed(1).padStart(9)}  ratio ${row.ratio.toFixed(3)}` : '') +
    `  loop delay p50 ${row.loopDelayMs.p50.toFixed(2)} ms, p99 ${row.loopDelayMs.p99.toFixed(2)} ms, max ${row.loopDelayMs.max.toFixed(1)} ms`);
}
await engine.dispose();
if (opt.json) {
  writeFileSync(opt.json, JSON.stringify({ tool: 'bench/node-api.mjs', date: new Date().toISOString(), node: process.version,
    model: opt.model, device: opt.device, workload: { prompt: kPrompt, newTokens: kNew, runs, text: opt.text }, rows }, null, 2));
}

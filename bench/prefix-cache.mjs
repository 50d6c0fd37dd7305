// Issue 22's prefix-caching measure, through the public API: the time to first token of a request with a long prefix
// nobody has sent before (the first), and of a request sent right after it with the same prefix and another ending
// (the second: a multi-turn chat's next turn, or another question about the same document), with prefixCaching on
// and off. With it on, the second computes only what follows the cached whole blocks of the prefix. Acceptance (H200,
// Qwen3-8B shape, 4,096-token prefix): the second request's first token >= 5x sooner than the first's.
//
//   npm run build:all && node bench/prefix-cache.mjs --model DIR [--device cuda] [--prefix 4096] [--suffix 32]
//                                                    [--runs 5] [--max-batch-tokens 8192] [--json FILE]
//
// Each run uses a prefix of its own (splitmix64 ids below 1000, as bench/node-api.mjs; --runs of them, after one
// untimed warm-up pair), so every first request is cold; each mode has an engine of its own, loaded one after the
// other. TTFT: from generate() to the first chunk read through `for await`. maxBatchTokens defaults to 8192 (as
// bench/node-api.mjs), so a first request's prefill takes one step up to that length. Medians of the runs.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { DEFAULT_MODEL_DIR, Engine } from '../dist/index.js';
import { median, streamIds as ids } from './workload.mjs';

const { values: opt } = parseArgs({
  options: {
    model: { type: 'string' },
    device: { type: 'string', default: 'auto' },
    prefix: { type: 'string', default: '4096' },
    suffix: { type: 'string', default: '32' },
    runs: { type: 'string', default: '5' },
    'max-batch-tokens': { type: 'string', default: '8192' },
    json: { type: 'string' },
  },
});
const model = opt.model ?? DEFAULT_MODEL_DIR;
const kPrefix = Number(opt.prefix), kSuffix = Number(opt.suffix), runs = Math.max(1, Number(opt.runs));
if (!(kPrefix >= 1 && kSuffix >= 1)) {
  console.error('usage: node bench/prefix-cache.mjs --model DIR [--device cuda] [--prefix 4096] [--suffix 32] [--runs 5]');
  process.exit(64);
}

// Milliseconds from generate() to the first chunk; the request then ends (one new token is all it asks for).
async function ttft(engine, tokens) {
  const t0 = performance.now();
  const gen = engine.generate({ tokens }, { maxTokens: 1, temperature: 0, stopTokenIds: [] });
  let first = 0;
  for await (const chunk of gen) if (!first && chunk.tokenIds.length) first = performance.now();
  return first - t0;
}

async function measure(prefixCaching) {
  const maxContext = kPrefix + kSuffix + 16;
  const engine = await Engine.load(model, {
    device: opt.device, maxContext, maxBatchTokens: Math.min(Number(opt['max-batch-tokens']), maxContext), prefixCaching,
  });
  const vocab = engine.modelInfo.vocabSize;
  const pair = async (run) => {
    const prefix = ids(1000 + run, kPrefix, vocab);
    const first = await ttft(engine, [...prefix, ...ids(2000 + run, kSuffix, vocab)]);
    const before = engine.stats().prefixCacheHitTokens;
    const second = await ttft(engine, [...prefix, ...ids(3000 + run, kSuffix, vocab)]);
    return { first, second, hitTokens: engine.stats().prefixCacheHitTokens - before };
  };
  await pair(0); // warm-up: graphs, caches, the allocator
  const rows = [];
  for (let run = 1; run <= runs; run++) rows.push(await pair(run));
  const device = engine.device;
  await engine.dispose();
  const first = median(rows.map((r) => r.first)), second = median(rows.map((r) => r.second));
  return { prefixCaching, device, firstMs: first, secondMs: second, speedup: first / second,
    hitTokens: median(rows.map((r) => r.hitTokens)), runs: rows };
}

const results = [await measure(true), await measure(false)];
console.log(`model ${model} (${results[0].device}); prefix ${kPrefix} tokens + ${kSuffix} of each request's own; ` +
  `median of ${runs} runs`);
console.log('| prefixCaching | first request TTFT | second request TTFT | first / second | tokens found cached |');
console.log('| --- | --- | --- | --- | --- |');
for (const r of results) {
  console.log(`| ${r.prefixCaching ? 'on' : 'off'} | ${r.firstMs.toFixed(1)} ms | ${r.secondMs.toFixed(1)} ms | ` +
    `${r.speedup.toFixed(2)}x | ${r.hitTokens} |`);
}
const on = results[0];
console.log(`acceptance (second request's first token >= 5x sooner, cache on): ${on.speedup >= 5 ? 'met' : 'NOT met'} ` +
  `(${on.speedup.toFixed(2)}x)`);
if (opt.json) {
  writeFileSync(opt.json, JSON.stringify({ tool: 'bench/prefix-cache.mjs', date: new Date().toISOString(), node: process.version,
    model, device: on.device, workload: { prefix: kPrefix, suffix: kSuffix, runs, maxBatchTokens: Number(opt['max-batch-tokens']) },
    results }, null, 2));
}

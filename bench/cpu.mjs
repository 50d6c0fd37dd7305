#!/usr/bin/env node
// CPU benchmark (issue: the spine; issue 31's CPU point for Qwen3.5). A random-weight bf16 checkpoint of --shape
// (default qwen3-0.6b, 1.2 GB; qwen3.5-0.8b: Qwen3.5-0.8B's hybrid text model, 1.5 GB; made on first use by
// scripts/random-checkpoint.mjs into bench/checkpoints/SHAPE-bf16, not committed); decode tok/s at batch 1 and 8;
// prefill tok/s for a 512-token prompt; and, in the same run, the machine's memory read bandwidth and the decode limit
// it implies (weight bytes read per token / bandwidth). Prints a table and one JSON line; medians of --runs runs.
//
//   npm run build:all && node bench/cpu.mjs [--shape qwen3-0.6b|qwen3.5-0.8b] [--threads 2] [--runs 3] [--tokens 64]
//       [--peer llama-cpp [--peer-version 3.22.1]]
//
// --peer llama-cpp: afterwards (never concurrently), bench/peer-llama-cpp.mjs measures node-llama-cpp (default
// 3.22.1) in a child process on the same checkpoint (converted to GGUF by bench/gguf.mjs, same weights: arch qwen3
// or qwen35) the same way; the table and the JSON gain its column and ours / peer ratios, and the JSON the count of
// leading greedy tokens of the warm-up decode (16-token prompt) on which the two agree (bf16 rounding can flip a
// near-tie; bench/peer-check.mjs compares the logits themselves).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { Engine } from '../dist/index.js';
import { benchCheckpoint, median } from './workload.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '3' },
    tokens: { type: 'string', default: '64' },
    shape: { type: 'string', default: 'qwen3-0.6b' },
    peer: { type: 'string' },
    'peer-version': { type: 'string' },
  },
});
if (values.peer !== undefined && values.peer !== 'llama-cpp') throw new Error(`--peer: only llama-cpp is known, not ${values.peer}`);
const threads = Number(values.threads), runs = Number(values.runs), newTokens = Number(values.tokens);

// 1. The checkpoint.
const dir = benchCheckpoint(values.shape);

// 2. Memory read bandwidth, measured now, on the same threads.
const cache = join(root, 'bench/.cache');
mkdirSync(cache, { recursive: true });
const membw = join(cache, 'membw');
execFileSync('cc', ['-O2', '-mavx2', '-pthread', join(root, 'bench/membw.c'), '-o', membw]);
const bw = JSON.parse(execFileSync(membw, [String(threads)]).toString());

// 3. The engine.
// Prefix caching off: the prefill prompt is the same every run, and a cache hit is not a prefill.
const engine = await Engine.load(dir, { device: 'cpu', threads, maxContext: 2048, prefixCaching: false });
const info = engine.modelInfo;
// Bytes a decode step must read: every weight matrix once, the embedding row aside (the tied lm_head reads it all).
const bytesPerToken = info.weightBytes;
const limit = (bw.readGBs * 1e9) / bytesPerToken;

const vocab = info.vocabSize;
const prompt = (n, salt) => Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729) % (vocab - 10) + 5);

async function decode(batch) {
  const gens = Array.from({ length: batch }, (_, b) =>
    engine.generate({ tokens: prompt(16, b + 1) }, { maxTokens: newTokens, stopTokenIds: [] }));
  const results = await Promise.all(gens);
  // Steady-state decode: from the last first-token to the first finish, all requests decode together.
  const ms = Math.min(...results.map((r) => r.timings.decodeMs));
  decode.ids = results[0].tokenIds;
  return (batch * (newTokens - 1)) / (ms / 1000);
}

async function prefill(n) {
  const r = await engine.generate({ tokens: prompt(n, 99) }, { maxTokens: 1, stopTokenIds: [] });
  return n / (r.timings.prefillMs / 1000);
}

await decode(1); // warm-up: page in the weights, spin up the pool
const warmIds = decode.ids; // the peer's warm-up decodes the same prompt greedily
const rows = { decode1: [], decode8: [], prefill512: [] };
for (let i = 0; i < runs; i++) {
  rows.decode1.push(await decode(1));
  rows.decode8.push(await decode(8));
  rows.prefill512.push(await prefill(512));
}
await engine.dispose();

const out = {
  date: new Date().toISOString().slice(0, 10),
  machine: `${cpus()[0].model} (${cpus().length} cores)`,
  commit: execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim(),
  shape: values.shape,
  threads,
  runs,
  weightBytes: bytesPerToken,
  readGBs: bw.readGBs,
  limitTokS: +limit.toFixed(1),
  decode1TokS: +median(rows.decode1).toFixed(2),
  decode8TokS: +median(rows.decode8).toFixed(2),
  prefill512TokS: +median(rows.prefill512).toFixed(1),
  all: Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, v.map((x) => +x.toFixed(2))])),
};
// 4. The peer, after ours, in a child process (never concurrently): the same metrics on the same weights.
let peer = null;
if (values.peer) {
  const args = [join(root, 'bench/peer-llama-cpp.mjs'), '--threads', String(threads), '--runs', String(runs),
    '--tokens', String(newTokens), '--shape', values.shape];
  if (values['peer-version']) args.push('--peer-version', values['peer-version']);
  const stdout = execFileSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] }).toString();
  peer = JSON.parse(stdout.trim().split('\n').pop());
  const ratio = (k) => +(out[k] / peer[k]).toFixed(2);
  let same = 0;
  while (same < peer.greedyIds.length && peer.greedyIds[same] === warmIds[same]) same++;
  out.peer = { ...peer, greedySamePrefix: `${same}/${peer.greedyIds.length}`,
    ratio: { decode1: ratio('decode1TokS'), decode8: ratio('decode8TokS'), prefill512: ratio('prefill512TokS') } };
}

const row = (label, ours, k, unit, note = '') => peer
  ? `| ${label} | ${ours}${unit}${note} | ${peer[k] != null ? peer[k] + unit : ''} | ${peer[k] ? (out[k] / peer[k]).toFixed(2) : ''} |`
  : `| ${label} | ${ours}${unit}${note} |`;
const blank = peer ? ' | |' : '';
console.log(`| metric | ${peer ? `vtengine | ${peer.peer} | ratio (ours / peer) |` : 'value |'}
| --- | --- |${peer ? ' --- | --- |' : ''}
| read bandwidth (${threads} threads) | ${bw.readGBs} GB/s |${blank}
| weight bytes per token | ${(bytesPerToken / 1e9).toFixed(3)} GB |${blank}
| bandwidth limit, batch 1 | ${out.limitTokS} tok/s |${blank}
${row('decode batch 1', out.decode1TokS, 'decode1TokS', ' tok/s', ` (${((out.decode1TokS / limit) * 100).toFixed(0)}% of the limit)`)}
${row('decode batch 8', out.decode8TokS, 'decode8TokS', ' tok/s')}
${row('prefill 512', out.prefill512TokS, 'prefill512TokS', ' tok/s')}`);
console.log(JSON.stringify(out));

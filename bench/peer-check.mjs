#!/usr/bin/env node
// Checks that the peer (node-llama-cpp on bench/gguf.mjs's GGUF) computes the same model as vtengine on a checkpoint
// before bench/cpu.mjs --peer times it: a correctness run, not a benchmark.
//
// For each prompt (token ids, lengths --prompts; the longer ones cross both engines' prefill chunking): vtengine
// generates --tokens greedy tokens with their top-5 logprobs (Engine.load(dir, { device: 'cpu' })); node-llama-cpp
// then (1) evaluates the prompt and ours' tokens in one call (teacher forced, its prefill path) and returns the full
// next-token logits at every generated position (3.21 has no logits option: its temperature-1 probabilities), which
// are compared with ours: the peer's argmax against our token, |Δ logprob| of our token and of our top 5, and the
// margin of ours' top 1 over the runner-up where they disagree; (2) generates greedily from the prompt by itself (its
// decode path): the count of leading tokens equal to ours. Prints a summary per prompt and one JSON line.
// With a BF16 GGUF the peer rounds its activations to bf16 in its products, so logprobs differ by up to ~0.03 (Qwen3)
// or ~0.3 (Qwen3.5) and near-ties flip; --type f32 (the same weights, widened) takes that rounding out and leaves
// differences of ~1e-3. A wrong conversion (a norm without its +1, value heads out of order) shows as differences of
// several nats at any --type.
//
//   node bench/peer-check.mjs --shape tiny-qwen3.5 [--prompts 5,40,300] [--tokens 12] [--type bf16|f16|f32]
//       [--peer-version 3.22.1] [--threads 2]           (checkpoint: bench/checkpoints/SHAPE-bf16, made on first use)
import { parseArgs } from 'node:util';

import { Engine } from '../dist/index.js';
import { convertToGguf } from './gguf.mjs';
import { PEER_NAME, PEER_VERSION, getCpuLlama, loadPeer } from './peer-llama-cpp.mjs';
import { benchCheckpoint } from './workload.mjs';

const { values } = parseArgs({
  options: {
    shape: { type: 'string', default: 'tiny-qwen3.5' },
    prompts: { type: 'string', default: '5,40,300' },
    tokens: { type: 'string', default: '12' },
    type: { type: 'string', default: 'bf16' },
    threads: { type: 'string', default: '2' },
    'peer-version': { type: 'string', default: PEER_VERSION },
  },
});
const threads = Number(values.threads), newTokens = Number(values.tokens);
const lengths = values.prompts.split(',').map(Number);
const TOP = 5;

const dir = benchCheckpoint(values.shape);
const ggufPath = `${dir}-${values.type}.gguf`;
convertToGguf(dir, ggufPath, { type: values.type });

// 1. Ours.
const engine = await Engine.load(dir, { device: 'cpu', threads, maxContext: 2048, prefixCaching: false });
const vocab = engine.modelInfo.vocabSize;
const prompt = (n, salt) => Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729) % (vocab - 10) + 5);
const ours = [];
for (const [k, n] of lengths.entries()) {
  const ids = prompt(n, k + 1);
  const r = await engine.generate({ tokens: ids }, { maxTokens: newTokens, stopTokenIds: [], logprobs: TOP });
  ours.push({ prompt: ids, tokens: r.tokenIds, logprobs: r.logprobs });
}
await engine.dispose();

// 2. The peer.
const peer = await loadPeer(values['peer-version']);
const llama = await getCpuLlama(peer, threads);
const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
const ctx = await model.createContext({ contextSize: 2048, sequences: 1, batchSize: 512, threads: { ideal: threads, min: threads } });
const seq = ctx.getSequence();

/** Natural-log softmax of a Map token → logit, in float64. */
function logSoftmax(logits) {
  let max = -Infinity;
  for (const v of logits.values()) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits.values()) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return (id) => logits.get(id) - lse;
}

// Raw logits where the version offers them (3.22); else (3.21) the full softmax of the raw logits, as its sampler
// gives it at temperature 1 with top-k, top-p and min-p off.
const [major, minor] = values['peer-version'].split('.').map(Number);
const generateNext = major > 3 || (major === 3 && minor >= 22) ? { logits: true }
  : { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } };

const report = [];
for (const o of ours) {
  // (1) teacher forced: the prompt, then our tokens but the last; the logits after the prompt's last token and after
  // each of ours.
  await seq.clearHistory();
  const input = [...o.prompt, ...o.tokens.slice(0, -1)];
  const want = new Set(Array.from({ length: newTokens }, (_, i) => o.prompt.length - 1 + i));
  const outs = await seq.controlledEvaluate(input.map((t, i) => (want.has(i) ? [t, { generateNext }] : t)));
  const steps = [];
  for (let i = 0; i < newTokens; i++) {
    const next = outs[o.prompt.length - 1 + i]?.next ?? {};
    const dist = next.logits ?? next.probabilities; // either map is sorted, highest first
    if (!dist) throw new Error(`the peer gave neither logits nor probabilities at step ${i}`);
    const lp = next.logits ? logSoftmax(next.logits) : (id) => Math.log(next.probabilities.get(id) ?? 0);
    const peerTop = dist.keys().next().value;
    const mine = o.logprobs[i];
    const topDiffs = mine.top.map((t) => Math.abs(lp(t.tokenId) - t.logprob));
    const margin = mine.top.length > 1 ? mine.top[0].logprob - mine.top[1].logprob : Infinity;
    steps.push({ agree: peerTop === o.tokens[i], dTok: Math.abs(lp(o.tokens[i]) - mine.logprob), dTop: Math.max(...topDiffs), margin });
  }
  // (2) the peer's own greedy decode.
  await seq.clearHistory();
  const free = [];
  for await (const { token } of seq.evaluateWithMetadata(o.prompt, {}, { temperature: 0, yieldEogToken: true })) {
    free.push(token);
    if (free.length >= newTokens) break;
  }
  let same = 0;
  while (same < newTokens && free[same] === o.tokens[same]) same++;
  const r = {
    prompt: o.prompt.length,
    teacherForcedArgmaxAgree: steps.filter((s) => s.agree).length,
    maxAbsDLogprobToken: +Math.max(...steps.map((s) => s.dTok)).toFixed(4),
    meanAbsDLogprobToken: +(steps.reduce((a, s) => a + s.dTok, 0) / steps.length).toFixed(4),
    maxAbsDLogprobTop5: +Math.max(...steps.map((s) => s.dTop)).toFixed(4),
    disagreeMargins: steps.filter((s) => !s.agree).map((s) => +s.margin.toFixed(4)),
    freeGreedySamePrefix: same,
    ours: o.tokens,
    peer: free,
  };
  report.push(r);
  console.error(`prompt ${r.prompt}: teacher-forced argmax agrees ${r.teacherForcedArgmaxAgree}/${newTokens}; ` +
    `|Δ logprob| of our token max ${r.maxAbsDLogprobToken} mean ${r.meanAbsDLogprobToken}, of our top ${TOP} max ` +
    `${r.maxAbsDLogprobTop5}${r.disagreeMargins.length ? `; our margins where they differ: ${r.disagreeMargins}` : ''}; ` +
    `the peer's own greedy run matches our first ${same}/${newTokens} tokens`);
}
await ctx.dispose();
await model.dispose();
const release = llama.llamaCppRelease;
await llama.dispose();
console.log(JSON.stringify({ shape: values.shape, type: values.type, peer: `${PEER_NAME} ${values['peer-version']}`,
  llamaCpp: release?.release ?? null, tokens: newTokens, results: report }));

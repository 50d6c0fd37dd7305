// What the Node benchmarks share: bench_cuda_engine's decode workload (its splitmix64 prompt ids and its engine
// setup, so that the Node figures and the C ABI's compare), other streams of the same ids, a checkpoint's
// tokenizer where a random bench checkpoint has none, the median, and the CPU benchmarks' random checkpoints.
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { writeRandomCheckpoint } from '../scripts/random-checkpoint.mjs';

/** bench/cuda-engine.cpp's kPrompt, kNew and kSeed. */
export const kPrompt = 128, kNew = 256;
const kSeed = 1n;

const M64 = (1n << 64n) - 1n;
function splitmix64(x) {
  x = (x + 0x9e3779b97f4a7c15n) & M64;
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & M64;
  return x ^ (x >> 31n);
}
const below = (x, vocab) => Number(x % BigInt(Math.min(1000, vocab)));

/** Request r's n prompt ids, as bench_cuda_engine's prompt_ids: below 1000 (and below `vocab`, for small fixtures). */
export const promptIds = (r, n, vocab = Infinity) =>
  Array.from({ length: n }, (_, i) => below(splitmix64((kSeed << 32n) + (BigInt(r) << 16n) + BigInt(i)), vocab));

/** n ids of a stream of its own (bench/prefix-cache.mjs: a new prefix per run), below 1000 and `vocab`. */
export const streamIds = (stream, n, vocab = Infinity) =>
  Array.from({ length: n }, (_, i) => below(splitmix64((BigInt(stream) << 32n) + BigInt(i)), vocab));

export const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];

/**
 * The CPU benchmarks' checkpoint of a shape (scripts/random-checkpoint.mjs): bench/checkpoints/SHAPE-bf16, random
 * bf16 weights, made on first use and kept (git-ignored). Returns its folder.
 */
export function benchCheckpoint(shape) {
  const dir = fileURLToPath(new URL(`./checkpoints/${shape}-bf16`, import.meta.url));
  if (!existsSync(join(dir, 'model.safetensors'))) {
    mkdirSync(dir, { recursive: true });
    console.error(`making ${dir} (random weights)...`);
    writeRandomCheckpoint(dir, shape, { dtype: 'bfloat16' });
  }
  return dir;
}

/**
 * Streams that carry text need a tokenizer; bench checkpoints are random weights without one (their ids are below
 * 1000, so any vocabulary decodes them): the Qwen3 tokenizer (test/fixtures/tokenizers/qwen3) is copied in.
 */
export function ensureTokenizer(dir) {
  if (existsSync(join(dir, 'tokenizer.json'))) return;
  const from = new URL('../test/fixtures/tokenizers/qwen3/', import.meta.url);
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(new URL(f, from), join(dir, f));
}

/**
 * An engine set up as bench_cuda_engine sets one up for its decode workload: maxSeqs for the largest batch (at least
 * 128), maxContext 8448 unless given, maxBatchTokens up to 8192, prefix caching off (a warm-up sends the timed runs'
 * prompts), and a KV pool for every request's prompt and new tokens in whole blocks (one spare each) or one
 * maxContext sequence, whichever is more. defaults: the engine as a user loads it with no options but the device
 * (issue 30's acceptance: the pool and maxSeqs at their defaults), prefix caching still off for the reason above.
 */
export async function loadDecodeEngine(Engine, model, { device, batches, maxContext, newTokens = kNew, defaults = false }) {
  if (defaults) return Engine.load(model, { device, prefixCaching: false });
  const maxSeqs = Math.max(128, ...batches);
  maxContext ??= 8192 + kNew;
  const base = { device, maxContext, maxSeqs, maxBatchTokens: Math.min(8192, maxContext), prefixCaching: false };
  const est = await Engine.estimate(model, base);
  const perSeq = (Math.ceil((kPrompt + newTokens) / 16) + 1) * 16;
  const kvTokens = Math.max(maxSeqs * perSeq, Math.ceil(maxContext / 16) * 16);
  return Engine.load(model, { ...base, kvCacheBytes: kvTokens * est.kvCache.bytesPerToken });
}

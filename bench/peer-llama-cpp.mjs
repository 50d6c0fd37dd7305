#!/usr/bin/env node
// The peer for bench/cpu.mjs: node-llama-cpp (llama.cpp, its packaged prebuilt CPU binary), CPU only, on a GGUF made
// from the very checkpoint vtengine loads (bench/gguf.mjs: same weights, BF16 matrices, F32 norms). Version:
// --peer-version, default PEER_VERSION (3.22.1, the latest release, llama.cpp v0.5.0; it runs both qwen3 and
// qwen35 — 3.21.1, llama.cpp v0.4.0, also lists qwen35, and measured the first Qwen3 rows in RESULTS.md).
// Measures what bench/cpu.mjs measures, the same way: decode tok/s at batch 1 and 8 (16-token prompts, --tokens
// new tokens, greedy, EOS ignored, timed from each sequence's first token to its last; batch 8 takes the shortest
// of the 8 windows, as cpu.mjs does), and prefill tok/s of a 512-token prompt (prompt tokens / time to first
// token). Medians of --runs runs, after one warm-up decode. Prints one JSON line on stdout; llama.cpp logs go to stderr.
// --shape names the checkpoint (bench/checkpoints/SHAPE-bf16, made by bench/cpu.mjs): qwen3-0.6b, qwen3.5-0.8b, ...
//
// node-llama-cpp is installed on first use into bench/.cache/peer/VERSION (git-ignored) with npm; it ships llama.cpp
// as prebuilt binaries inside npm packages (@node-llama-cpp/linux-x64), and is told never to download or build.
// bench/peer-check.mjs uses loadPeer() to compare its logits with ours.
//
//   node bench/peer-llama-cpp.mjs [--threads 2] [--runs 3] [--tokens 64] [--shape qwen3-0.6b] [--type bf16|f16] [--peer-version 3.22.1]
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { convertToGguf } from './gguf.mjs';
import { median } from './workload.mjs';

export const PEER_NAME = 'node-llama-cpp';
export const PEER_VERSION = '3.22.1';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Installs node-llama-cpp@version (once) into bench/.cache/peer/VERSION and returns its module. */
export async function loadPeer(version = PEER_VERSION) {
  const prefix = join(root, 'bench/.cache/peer', version);
  const pkgDir = join(prefix, 'node_modules/node-llama-cpp');
  const installed = () => {
    try { return JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')).version === version; }
    catch { return false; }
  };
  if (!installed()) {
    mkdirSync(prefix, { recursive: true });
    console.error(`installing ${PEER_NAME}@${version} into ${prefix}...`);
    execFileSync('npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', `${PEER_NAME}@${version}`],
      { stdio: ['ignore', 2, 2], env: { ...process.env, NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' } });
  }
  return import(pathToFileURL(join(pkgDir, 'dist/index.js')).href);
}

/** The prebuilt CPU binary only, never a download or a build; `threads` threads for every evaluation. */
export async function getCpuLlama(peer, threads) {
  return peer.getLlama({ gpu: false, build: 'never', usePrebuiltBinaries: true, skipDownload: true,
    maxThreads: threads, logLevel: peer.LlamaLogLevel.warn, progressLogs: false });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();

async function main() {
  const { values } = parseArgs({
    options: {
      threads: { type: 'string', default: '2' },
      runs: { type: 'string', default: '3' },
      tokens: { type: 'string', default: '64' },
      shape: { type: 'string', default: 'qwen3-0.6b' },
      type: { type: 'string', default: 'bf16' },
      'peer-version': { type: 'string', default: PEER_VERSION },
    },
  });
  const threads = Number(values.threads), runs = Number(values.runs), newTokens = Number(values.tokens);
  const version = values['peer-version'];

  // 1. The package, from the npm registry, into a git-ignored folder.
  const peer = await loadPeer(version);

  // 2. The model: the benchmark checkpoint as GGUF (converted once, kept next to it).
  const dir = join(root, 'bench/checkpoints', `${values.shape}-bf16`);
  if (!existsSync(join(dir, 'model.safetensors'))) throw new Error(`${dir} is missing: run bench/cpu.mjs first, it makes it`);
  const ggufPath = `${dir}-${values.type}.gguf`;
  const conv = convertToGguf(dir, ggufPath, { type: values.type });
  if (!conv.cached) console.error(`wrote ${ggufPath}`);

  // 3. The engine: prebuilt CPU binary only, never a download or a build; `threads` threads for every evaluation.
  const llama = await getCpuLlama(peer, threads);
  const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0 });
  const vocab = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).vocab_size; // the same ids as cpu.mjs feeds
  const ctxOpts = { threads: { ideal: threads, min: threads }, batchSize: 512 };
  // Batch 1 and prefill on a one-sequence context; batch 8 on an eight-sequence one (the same total KV room per sequence).
  const ctx1 = await model.createContext({ ...ctxOpts, contextSize: 1024, sequences: 1 });
  const ctx8 = await model.createContext({ ...ctxOpts, contextSize: 8 * 256, sequences: 8 });
  const seq1 = ctx1.getSequence();
  const seqs8 = Array.from({ length: 8 }, () => ctx8.getSequence());

  const prompt = (n, salt) => Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729) % (vocab - 10) + 5);

  /** Runs one sequence from a fresh history; returns the time of its first token, its last, and its ids. */
  async function run(seq, tokens, maxTokens) {
    await seq.clearHistory();
    const t0 = performance.now();
    let first = 0, last = 0, n = 0;
    const ids = [];
    for await (const { token } of seq.evaluateWithMetadata(tokens, {}, { temperature: 0, yieldEogToken: true })) {
      last = performance.now();
      if (n === 0) first = last;
      ids.push(token);
      if (++n >= maxTokens) break;
    }
    return { t0, first, last, ids };
  }

  async function decode(batch) {
    const seqs = batch === 1 ? [seq1] : seqs8.slice(0, batch);
    const rs = await Promise.all(seqs.map((s, b) => run(s, prompt(16, b + 1), newTokens)));
    const ms = Math.min(...rs.map((r) => r.last - r.first));
    return { tokS: (batch * (newTokens - 1)) / (ms / 1000), ids: rs.map((r) => r.ids) };
  }

  async function prefill(n) {
    const r = await run(seq1, prompt(n, 99), 1);
    return n / ((r.first - r.t0) / 1000);
  }

  const warm = await decode(1); // warm-up: page in the weights, spin up the threads
  const rows = { decode1: [], decode8: [], prefill512: [] };
  for (let i = 0; i < runs; i++) {
    rows.decode1.push((await decode(1)).tokS);
    rows.decode8.push((await decode(8)).tokS);
    rows.prefill512.push(await prefill(512));
  }
  await ctx8.dispose();
  await ctx1.dispose();
  await model.dispose();
  await llama.dispose();

  console.log(JSON.stringify({
    peer: `${PEER_NAME} ${version}`,
    llamaCpp: llama.llamaCppRelease ?? null,
    gguf: ggufPath.slice(root.length),
    type: values.type,
    threads,
    runs,
    decode1TokS: +median(rows.decode1).toFixed(2),
    decode8TokS: +median(rows.decode8).toFixed(2),
    prefill512TokS: +median(rows.prefill512).toFixed(1),
    all: Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, v.map((x) => +x.toFixed(2))])),
    greedyIds: warm.ids[0].slice(0, 16),
  }));
}

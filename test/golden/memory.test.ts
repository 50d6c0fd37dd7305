// Memory introspection against references read in the test itself: /proc/self/smaps_rollup and /proc/meminfo
// (parsed here with a regex of its own, not lib/memory/procfs.ts), the safetensors headers of each checkpoint, the
// KV bytes a token needs by the model's shape, and what the engine reports once loaded.
//
// "Steady usage", which Engine.estimate must be within 10% of: after load and one full-context run that writes every
// page of the KV pool, the engine's own accounting — mapped-resident weights (mincore of the checkpoint mappings) +
// host weight copies + resident KV pages (mincore of the pool) + workspaces. The pool is sized by kvCacheBytes to
// exactly maxContext tokens, and the run is one prompt of maxContext - 1 tokens plus one new token, so the run
// writes all of it; a second case keeps the default pool (4096 tokens) and fills it with concurrent decodes.
// The 0.6B shape, with a procfs PSS cross-check, is test/golden/memory-0.6b.test.ts.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { DEFAULT_MODEL_DIR, DisposedError, Engine, InvalidOptionError, OutOfMemoryError, type MemoryEstimate } from '../../lib/index.js';
import { copyCheckpoint, headerTensors, removeTempDirs, tempDir } from '../helpers/checkpoints.js';
import { fixtureDir, listFixtures } from '../helpers/fixtures.js';
// @ts-expect-error -- a plain .mjs script shared with the benchmarks
import { SHAPES, writeRandomCheckpoint } from '../../scripts/random-checkpoint.mjs';

const KB = 1024;
const MiB = 2 ** 20;

/** Rss, Pss, Private_* and Swap of this process, in bytes, read now. */
function rollup(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of readFileSync('/proc/self/smaps_rollup', 'utf8').matchAll(/^(\w+):\s+(\d+) kB$/gm)) out[m[1]!] = Number(m[2]) * KB;
  return out;
}

function meminfo(): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of readFileSync('/proc/meminfo', 'utf8').matchAll(/^(\w+):\s+(\d+) kB$/gm)) out[m[1]!] = Number(m[2]) * KB;
  return out;
}

/** A fixture's config.json, the text model's fields (a composite config nests them under text_config). */
function textConfig(dir: string): Record<string, unknown> {
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  return (config.text_config as Record<string, unknown> | undefined) ?? config;
}

/** Tensors a text model never reads, by their checkpoint names: a vision tower and an MTP head. */
const isSkipped = (name: string): boolean => name.startsWith('model.visual.') || name.startsWith('mtp.');

/**
 * Bytes of every tensor in the folder's safetensors files, from their headers: those the language model uses (a tied
 * lm_head counts once) and those it skips.
 */
function checkpointTensorBytes(dir: string): { used: number; skipped: number } {
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { tie_word_embeddings?: boolean };
  let used = 0, skipped = 0;
  for (const t of headerTensors(dir)) {
    if (t.name === 'lm_head.weight' && config.tie_word_embeddings) continue; // the engine uses the embedding
    if (isSkipped(t.name)) skipped += t.bytes;
    else used += t.bytes;
  }
  return { used, skipped };
}

/** Layers keeping K/V: every layer, or those config.json's layer_types calls full_attention (the hybrid models). */
function attentionLayers(dir: string, nLayers: number): number {
  const types = textConfig(dir).layer_types as string[] | undefined;
  return types ? types.filter((t) => t === 'full_attention').length : nLayers;
}

/** KV bytes of one token by the model's shape: keys and values of every attention layer, fp32 on the CPU backend. */
function kvBytesPerToken(engine: Engine, dir: string): number {
  const { nLayers, nKvHeads, headDim } = engine.modelInfo;
  return 2 * attentionLayers(dir, nLayers) * nKvHeads * headDim * 4;
}

/**
 * A hybrid model's state slot bytes by its config (transformers' field names): per Gated DeltaNet layer the conv's
 * last W - 1 inputs (q|k|v wide) and the recurrent state (value heads x key dim x value dim), fp32, one per seat.
 */
function stateSlotBytes(dir: string, seats: number): number {
  const t = textConfig(dir);
  const linear = ((t.layer_types as string[] | undefined) ?? []).filter((x) => x === 'linear_attention').length;
  if (linear === 0) return 0;
  const [hk, hv, dk, dv, w] = ['linear_num_key_heads', 'linear_num_value_heads', 'linear_key_head_dim', 'linear_value_head_dim',
    'linear_conv_kernel_dim'].map((k) => t[k] as number);
  const perLayer = (w! - 1) * (2 * hk! * dk! + hv! * dv!) + hv! * dk! * dv!;
  return seats * linear * perLayer * 4;
}

function prompt(n: number, vocab: number, salt = 0): number[] {
  return Array.from({ length: n }, (_, i) => ((i + salt) * 7919 + salt * 104729) % (vocab - 10) + 5);
}

function within(actual: number, expected: number, tolerance: number): void {
  expect(Math.abs(actual - expected), `${actual} vs ${expected}`).toBeLessThanOrEqual(tolerance * expected);
}

const CHECKPOINTS: Array<[string, string]> = [...listFixtures().map((n): [string, string] => [n, fixtureDir(n)]), ['models/default', DEFAULT_MODEL_DIR]];
const engines: Engine[] = [];
async function load(dir: string, options: Parameters<typeof Engine.load>[1] = {}): Promise<Engine> {
  const engine = await Engine.load(dir, { device: 'cpu', threads: 2, ...options });
  engines.push(engine);
  return engine;
}
afterAll(async () => {
  await Promise.all(engines.map((e) => e.dispose()));
  removeTempDirs();
});

describe('engine.memory()', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await load(DEFAULT_MODEL_DIR, { maxContext: 1024 });
    await engine.generate({ tokens: prompt(64, engine.modelInfo.vocabSize) }, { maxTokens: 8 });
  });

  it('reports this process as /proc/self/smaps_rollup does, within 5%', async () => {
    const before = rollup();
    const snap = await engine.memory();
    const after = rollup();
    expect(snap.process).not.toBeNull();
    expect(snap.process!.source).toBe('smaps_rollup');
    const p = snap.process!;
    for (const [figure, key] of [[p.pssBytes, 'Pss'], [p.rssBytes, 'Rss']] as const) {
      expect(figure).toBeGreaterThanOrEqual(0.95 * Math.min(before[key]!, after[key]!));
      expect(figure).toBeLessThanOrEqual(1.05 * Math.max(before[key]!, after[key]!));
    }
    const uss = (r: Record<string, number>): number => r.Private_Clean! + r.Private_Dirty!;
    expect(p.ussBytes).toBeGreaterThanOrEqual(0.95 * Math.min(uss(before), uss(after)));
    expect(p.ussBytes).toBeLessThanOrEqual(1.05 * Math.max(uss(before), uss(after)));
    expect(p.swapBytes).toBeLessThanOrEqual(Math.max(before.Swap!, after.Swap!) * 1.05 + 64 * KB);
    expect(p.pssAnonBytes! + p.pssFileBytes!).toBeLessThanOrEqual(p.pssBytes);
    expect(snap.reasons).toStrictEqual({});
  });

  it('reports the machine as /proc/meminfo does (MemAvailable within 5%: other processes move it)', async () => {
    const before = meminfo();
    const snap = await engine.memory();
    const after = meminfo();
    expect(snap.system!.totalBytes).toBe(before.MemTotal);
    expect(snap.system!.availableBytes).toBeGreaterThanOrEqual(0.95 * Math.min(before.MemAvailable!, after.MemAvailable!));
    expect(snap.system!.availableBytes).toBeLessThanOrEqual(1.05 * Math.max(before.MemAvailable!, after.MemAvailable!));
  });

  it('has no gpu section on the CPU backend, and components that sum to the engine total', async () => {
    const { engine: m, gpu } = await engine.memory();
    expect(gpu).toBeUndefined();
    expect('gpu' in (await engine.memory())).toBe(false);
    expect(m.components.map((c) => `${c.name}/${c.tier}`)).toStrictEqual(['weights/mapped', 'weights/host', 'kv_cache/host', 'workspace/host']);
    expect(m.totalBytes).toBe(m.components.reduce((s, c) => s + c.bytes, 0));
    expect(m.totalBytes).toBe(m.weights.mappedBytes + m.weights.hostBytes + m.kvCache.bytes + m.workspaceBytes);
    expect(m.weights.deviceBytes).toBe(0);
    expect(m.graphs).toStrictEqual({ count: 0, bytes: 0 });
    // The KV figures are the ones stats() has always shown, and the pool is as big as the shape says.
    const s = engine.stats();
    expect([m.kvCache.bytes, m.kvCache.blocksTotal, m.kvCache.blockSize]).toStrictEqual([s.kvCacheBytes, s.kvBlocksTotal, s.kvBlockSize]);
    expect(m.kvCache.bytes).toBe(m.kvCache.blocksTotal * m.kvCache.blockSize * kvBytesPerToken(engine, DEFAULT_MODEL_DIR));
    expect([m.kvCache.stateSlotBytes, m.weights.skippedBytes]).toStrictEqual([0, 0]); // a dense model's own checkpoint
    expect([s.stateSlotsTotal, s.stateSlotsMapped, s.stateSlotsHeld]).toStrictEqual([0, 0, 0]); // (no recurrent layers)
    // The CPU's pool is fixed: every block is mapped (its pages committed as they are written).
    expect([m.kvCache.blocksMapped, s.kvBlocksMapped]).toStrictEqual([m.kvCache.blocksTotal, s.kvBlocksTotal]);
    expect(s.kvCacheResidentBytes).toBeGreaterThanOrEqual(0);
    expect(s.kvCacheResidentBytes).toBeLessThanOrEqual(s.kvCacheBytes);
  });
});

describe("the engine's weight bytes", () => {
  it.each(CHECKPOINTS)('equal the tensor bytes in the safetensors headers: %s', async (_name, dir) => {
    const { used: expected, skipped } = checkpointTensorBytes(dir);
    const engine = await load(dir, { maxContext: 64 });
    const { weights } = (await engine.memory()).engine;
    expect(weights.mappedBytes).toBe(expected);
    expect(weights.skippedBytes).toBe(skipped); // a vision tower's bytes, listed and never read
    expect(engine.modelInfo.weightBytes).toBe(expected);
    const est = await Engine.estimate(dir, { maxContext: 64 });
    expect([est.weights.totalBytes, est.weights.skippedBytes]).toStrictEqual([expected, skipped]);
    // The mapping is resident once a forward pass has read every matrix (the files are small: every page). The
    // embedding gather reads only the prompt's rows, so the table's other pages are resident only if the page cache
    // already held them (or read-around brought them): the files are read first, so a cold cache (a CI run came 4
    // pages short) does not decide what this checks, that the report counts the mapping's resident pages.
    for (const f of readdirSync(dir).filter((n) => n.endsWith('.safetensors'))) readFileSync(join(dir, f));
    await engine.generate({ tokens: [5, 6, 7] }, { maxTokens: 1 });
    expect((await engine.memory()).engine.weights.mappedResidentBytes).toBeGreaterThanOrEqual(expected);
    await engine.dispose();
  });
});

describe('KV cache accounting', () => {
  it('blocks are taken as a long generation runs and all given back at its end; resident pages grow', async () => {
    const engine = await load(DEFAULT_MODEL_DIR, { maxContext: 2048 });
    const perToken = kvBytesPerToken(engine, DEFAULT_MODEL_DIR);
    const fresh = (await engine.memory()).engine.kvCache;
    expect(fresh.blocksUsed).toBe(0);
    const P = 16, N = 1000;
    // Read at the loop's pace, a snapshot every 100 tokens read: the request runs at most 32 ahead of the loop (it
    // pauses, keeping its blocks, while a snapshot is taken), so every snapshot lands inside the run however slow
    // memory() or the host is.
    const gen = engine.generate({ tokens: prompt(P, engine.modelInfo.vocabSize) }, { maxTokens: N, stopTokenIds: [], highWaterMark: 32 });
    let seen = 0;
    gen.on('token', (c) => void (seen += c.tokenIds.length));
    const observed: Array<{ seen: number; used: number }> = [];
    let read = 0;
    for await (const chunk of gen) {
      read += chunk.tokenIds.length;
      if (read % 100 !== 0 || read >= N) continue;
      const at = seen;
      const { kvCache } = (await engine.memory()).engine;
      observed.push({ seen: at, used: kvCache.blocksUsed });
    }
    const result = await gen;
    expect(result.usage.completionTokens).toBe(N);
    const live = observed.filter((o) => o.used > 0);
    expect(live.length).toBe(9);
    for (const o of live) {
      // The step thread is never behind what JS has seen: the prompt and every token but the newest have KV.
      expect(o.used).toBeGreaterThanOrEqual(Math.ceil((P + Math.max(o.seen - 1, 0)) / fresh.blockSize));
      expect(o.used).toBeLessThanOrEqual(Math.ceil((P + N) / fresh.blockSize));
    }
    expect(Math.max(...live.map((o) => o.used))).toBeGreaterThan(Math.min(...live.map((o) => o.used)));
    const after = (await engine.memory()).engine.kvCache;
    expect(after.blocksUsed).toBe(0);
    expect(engine.stats().kvBlocksUsed).toBe(0);
    expect(after.residentBytes! - (fresh.residentBytes ?? 0)).toBeGreaterThanOrEqual((P + N - 1) * perToken);
    await engine.dispose();
  });
});

describe('Engine.estimate against steady usage', () => {
  /** The engine's steady usage, as defined at the top of this file. */
  async function steady(engine: Engine): Promise<number> {
    const { weights, kvCache, workspaceBytes } = (await engine.memory()).engine;
    return weights.mappedResidentBytes + weights.hostBytes + kvCache.residentBytes! + workspaceBytes;
  }
  const total = (est: MemoryEstimate): number => est.totals.hostHeapBytes + est.totals.pageCacheBytes + est.totals.deviceBytes;

  async function sameAsLoaded(est: MemoryEstimate, engine: Engine, dir: string, seats = 64): Promise<void> {
    const m = (await engine.memory()).engine;
    expect(est.kvCache.bytes).toBe(m.kvCache.bytes);
    expect(est.kvCache.tokens).toBe(m.kvCache.blocksTotal * m.kvCache.blockSize);
    expect(est.kvCache.bytesPerToken).toBe(kvBytesPerToken(engine, dir));
    // The pool's blocks and, for a hybrid model, a state slot per seat (maxSeqs; the CPU's default 64) by its config
    expect([est.kvCache.stateSlotBytes, m.kvCache.stateSlotBytes]).toStrictEqual([stateSlotBytes(dir, seats), stateSlotBytes(dir, seats)]);
    // stats() counts them: a slot per seat for a hybrid model (every one mapped on the CPU), none for a dense one;
    // none held by an idle engine
    const s = engine.stats();
    const slots = stateSlotBytes(dir, seats) > 0 ? seats : 0;
    expect([s.stateSlotsTotal, s.stateSlotsMapped, s.stateSlotsHeld]).toStrictEqual([slots, slots, 0]);
    expect(m.kvCache.bytes).toBe(est.kvCache.tokens * kvBytesPerToken(engine, dir) + m.kvCache.stateSlotBytes);
    expect(est.workspaceBytes).toBe(m.workspaceBytes);
    expect([est.pinnedHostBytes, m.pinnedHostBytes]).toStrictEqual([0, 0]); // the CPU backend pins nothing
    expect(est.weights).toStrictEqual({
      totalBytes: m.weights.mappedBytes,
      deviceBytes: 0,
      hostBytes: m.weights.hostBytes,
      mappedBytes: m.weights.mappedBytes,
      skippedBytes: m.weights.skippedBytes,
    });
    expect(est.maxContext).toBe(engine.modelInfo.maxContext);
    expect(est.fits).toBe(true);
  }

  it.each(CHECKPOINTS)('within a tenth after a full-context run, KV and workspaces exactly: %s', async (_name, dir) => {
    const M = Math.min(512, (await Engine.estimate(dir)).maxContext);
    const perToken = (await Engine.estimate(dir, { maxContext: M })).kvCache.bytesPerToken;
    // (A hybrid model's one request writes one state slot: a seat, so the estimate is what the run touches.)
    const seats = stateSlotBytes(dir, 1) > 0 ? 1 : 64;
    const options = { maxContext: M, kvCacheBytes: M * perToken, ...(seats === 1 ? { maxSeqs: 1 } : {}) };
    const est = await Engine.estimate(dir, options);
    expect(est.kvCache.tokens).toBe(M);
    const engine = await load(dir, options);
    await sameAsLoaded(est, engine, dir, seats);
    const r = await engine.generate({ tokens: prompt(M - 1, engine.modelInfo.vocabSize) }, { maxTokens: 1, stopTokenIds: [] });
    expect(r.usage.completionTokens).toBe(1);
    within(total(est), await steady(engine), 0.1);
    await engine.dispose();
  });

  it('within 10% with the default pool, filled by concurrent decodes (llama-bf16)', async () => {
    const dir = fixtureDir('llama-bf16');
    const M = 512;
    const est = await Engine.estimate(dir, { maxContext: M });
    const engine = await load(dir, { maxContext: M });
    await sameAsLoaded(est, engine, dir);
    const n = est.kvCache.tokens / M; // 4096 / 512: every block in use at once
    const vocab = engine.modelInfo.vocabSize;
    await Promise.all(Array.from({ length: n }, (_, i) => engine.generate({ tokens: prompt(16, vocab, i) }, { maxTokens: M - 16, stopTokenIds: [] })));
    expect(engine.stats().preemptions).toBe(0);
    expect((await engine.memory()).engine.kvCache.residentBytes).toBe(est.kvCache.bytes);
    within(total(est), await steady(engine), 0.1);
  });

  it('checks its options with the validator Engine.load uses, and sizes the default model without a folder', async () => {
    for (const bad of [{ maxContext: -1 }, { nope: 1 }, { device: 'gpu' }]) {
      const fromLoad = await Engine.load(DEFAULT_MODEL_DIR, bad as never).catch((e: unknown) => e as Error);
      const fromEstimate = await Engine.estimate(DEFAULT_MODEL_DIR, bad as never).catch((e: unknown) => e as Error);
      expect(fromEstimate).toBeInstanceOf(InvalidOptionError);
      expect(fromEstimate.message).toBe(fromLoad.message);
    }
    await expect(Engine.estimate('')).rejects.toThrow(/Engine\.estimate needs the path of a checkpoint folder/);
    await expect(Engine.estimate('/no/such/folder')).rejects.toMatchObject({ code: 'ERR_MODEL_NOT_FOUND' });
    const plain = await Engine.estimate();
    const withOptions = await Engine.estimate({ maxContext: 256 });
    expect({ ...plain, hostAvailableBytes: 0 }).toStrictEqual({ ...(await Engine.estimate(DEFAULT_MODEL_DIR)), hostAvailableBytes: 0 });
    expect(withOptions.maxContext).toBe(256);
  });
});

describe('a load that cannot fit', () => {
  it('fails with ERR_OUT_OF_MEMORY naming kvCacheBytes when the pool holds fewer tokens than maxContext', async () => {
    const dir = fixtureDir('qwen3-bf16-sharded');
    const perToken = (await Engine.estimate(dir)).kvCache.bytesPerToken;
    const options = { maxContext: 1024, kvCacheBytes: perToken * 1000 };
    const err = await Engine.load(dir, options).catch((e: unknown) => e as OutOfMemoryError);
    expect(err).toBeInstanceOf(OutOfMemoryError);
    expect(err.code).toBe('ERR_OUT_OF_MEMORY');
    expect(err.message).toMatch(/holds 992 tokens, fewer than maxContext 1024/);
    expect(err.message).toContain(`raise kvCacheBytes to at least ${1024 * perToken}`);
    expect(err.message).toContain('or lower maxContext to 992');
    const est = await Engine.estimate(dir, options);
    expect(est.fits).toBe(false);
    expect(est.kvCache.tokens).toBe(992);
    // The suggestion is real: loading with it works.
    const engine = await load(dir, { ...options, ...est.suggestedOptions });
    expect(engine.stats().kvBlocksTotal * engine.stats().kvBlockSize).toBe(1024);
    await engine.dispose();
  });

  it('fails fast, before allocating, when kvCacheBytes is larger than MemAvailable; the suggestion fits', async () => {
    const dir = fixtureDir('llama-bf16');
    const options = { maxContext: 1024, kvCacheBytes: 2 * meminfo().MemTotal! };
    const tracker = (await load(dir, { maxContext: 16 })).trackMemory({ intervalMs: 10 });
    const started = performance.now();
    const err = await Engine.load(dir, options).catch((e: unknown) => e as OutOfMemoryError);
    const ms = performance.now() - started;
    const peaks = tracker.stop();
    expect(err).toBeInstanceOf(OutOfMemoryError);
    expect(err.message).toMatch(/needs [\d.]+ GiB of host memory .* but [\d.]+ GiB is available: set kvCacheBytes to \d+/);
    expect(ms).toBeLessThan(5000);
    expect(peaks.rssBytes! - peaks.baseline.rssBytes!).toBeLessThan(64 * MiB);
    const est = await Engine.estimate(dir, options);
    expect(est.fits).toBe(false);
    expect(est.suggestedOptions?.kvCacheBytes).toBeLessThan(options.kvCacheBytes);
    expect((await Engine.estimate(dir, { ...options, ...est.suggestedOptions })).fits).toBe(true);
  });

  it('fails with "lower maxContext" when a long maxContext makes the default pool larger than MemAvailable', async () => {
    // A tiny model whose config allows a context long enough that its default pool (one maxContext) is twice MemTotal.
    const shape = SHAPES['tiny-llama'] as Record<string, number>;
    const perToken = 2 * shape.num_hidden_layers! * shape.num_key_value_heads! * shape.head_dim! * 4;
    const maxContext = 2 ** Math.ceil(Math.log2((2 * meminfo().MemTotal!) / perToken));
    if (maxContext > 2 ** 30) return; // a machine with more than ~256 GiB: nothing this shape can overflow
    const dir = tempDir();
    (writeRandomCheckpoint as (d: string, s: object) => void)(dir, { ...shape, max_position_embeddings: maxContext });
    const err = await Engine.load(dir, { maxContext }).catch((e: unknown) => e as OutOfMemoryError);
    expect(err).toBeInstanceOf(OutOfMemoryError);
    expect(err.message).toMatch(/lower maxContext to \d+ or less/);
    const est = await Engine.estimate(dir, { maxContext });
    expect(est.suggestedOptions).toStrictEqual({ maxContext: expect.any(Number) });
    expect((await Engine.estimate(dir, { maxContext: est.suggestedOptions!.maxContext })).fits).toBe(true);
  });

  it('still reports other load failures as they are', async () => {
    const dir = copyCheckpoint(fixtureDir('llama-bf16'));
    writeFileSync(join(dir, 'config.json'), '{');
    await expect(Engine.load(dir, { kvCacheBytes: 100 })).rejects.toMatchObject({ code: 'ERR_BAD_CHECKPOINT' });
  });
});

describe('engine.trackMemory()', () => {
  it('peaks over a generation are at least every sample and the baseline', async () => {
    const engine = await load(DEFAULT_MODEL_DIR, { maxContext: 1024 });
    const samples: number[] = [];
    const tracker = engine.trackMemory({ intervalMs: 10, onSample: (s) => samples.push(s.pssBytes!) });
    await engine.generate({ tokens: prompt(512, engine.modelInfo.vocabSize) }, { maxTokens: 64, stopTokenIds: [] });
    const peaks = tracker.stop();
    expect(peaks.samples).toBe(samples.length);
    expect(peaks.pssBytes).toBe(Math.max(...samples));
    expect(peaks.pssBytes).toBeGreaterThanOrEqual(peaks.baseline.pssBytes!);
    expect(peaks.rssBytes).toBeGreaterThanOrEqual(peaks.baseline.rssBytes!);
    expect(peaks.availableDropBytes).toBeGreaterThanOrEqual(0);
    expect(peaks.gpuBytes).toBeNull();
  });

  it('stops when the engine is disposed; memory() and trackMemory() then throw DisposedError', async () => {
    const engine = await load(fixtureDir('llama-bf16'));
    const a = engine.trackMemory({ intervalMs: 10 });
    const b = engine.trackMemory();
    b.stop();
    await engine.dispose();
    expect(a.stopped).toBe(true);
    const n = a.samples;
    await new Promise((r) => setTimeout(r, 50));
    expect(a.samples).toBe(n);
    expect(a.stop().samples).toBe(n);
    await expect(engine.memory()).rejects.toBeInstanceOf(DisposedError);
    expect(() => engine.trackMemory()).toThrow(DisposedError);
  });
});

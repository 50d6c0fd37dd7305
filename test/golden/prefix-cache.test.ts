// Prefix caching (cuda/src/block_manager.cpp, Scheduler::reuse_prefix) must not change what a request generates: the
// same requests on an engine with the cache and one without give bit-equal ids and logprobs, for a multi-turn chat
// (each turn = the last prompt + its reply + more), concurrent requests sharing a system prompt, the same prompt
// again (cached to its end: its last block is recomputed), seeded sampling, teacher forcing next to cached prefixes,
// and a KV pool small enough that cached blocks are evicted and requests preempted. stats() counts the hits, and
// aborts and dispose leave no block held.
//
// VT_CPU_ISA=scalar: on the SIMD paths the CPU matmul takes a GEMV for steps of up to 8 rows and a packed kernel for
// larger ones, whose sums differ in the last bits, so there a position's K/V depend on the step that computed it (a
// reply's K/V computed by decode steps differ by rounding from the same tokens computed in a prefill, exactly as in
// batching). The scalar path computes each row the same way in any step, so with it the cache must change nothing at
// all. prefix-cache-simd.test.ts checks the default path within rounding. The ISA is read once per process (this
// file runs in its own: vitest.config.ts, forks), before the first engine loads.
process.env.VT_CPU_ISA = 'scalar';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine, type EngineStats, type GenerateOptions, type GenerationResult } from '../../lib/index.js';
import { fixtureDir, hasRecurrentLayers, listFixtures, readReference } from '../helpers/fixtures.js';

const fixtures = listFixtures();
const name = fixtures.includes('llama-bf16') ? 'llama-bf16' : fixtures[0];
const BS = 16; // the default kvBlockSize

/** What must be equal with the cache on and off: ids, logprobs with their top lists, and the finish. */
function outcome(r: GenerationResult): unknown {
  return { ids: r.tokenIds, logprobs: r.logprobs, finish: r.finishReason, usage: r.usage };
}

/** Whole blocks of a sequence that computed `computed` tokens, as a later one `length` long can reuse them. */
function reusable(computed: number, length: number): number {
  return Math.floor(Math.min(computed, length - 1) / BS) * BS;
}

function delta(after: EngineStats, before: EngineStats): Record<string, number> {
  return {
    queries: after.prefixCacheQueries - before.prefixCacheQueries,
    queryTokens: after.prefixCacheQueryTokens - before.prefixCacheQueryTokens,
    hitTokens: after.prefixCacheHitTokens - before.prefixCacheHitTokens,
  };
}

describe.skipIf(!name)('prefix caching: bit-equal outputs with the cache on and off (scalar path)', () => {
  const ref = name ? readReference(name) : undefined;
  let on: Engine;
  let off: Engine;
  const long = (): number[] => ref!.prompts.reduce((a, b) => (b.ids.length > a.ids.length ? b : a)).ids;
  const gen = (e: Engine, tokens: number[], options: GenerateOptions = {}): PromiseLike<GenerationResult> =>
    e.generate({ tokens }, { maxTokens: 20, stopTokenIds: [], logprobs: 3, ...options });

  beforeAll(async () => {
    on = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2 });
    off = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2, prefixCaching: false });
  });
  afterAll(async () => {
    await Promise.all([on?.dispose(), off?.dispose()]);
  });

  it('a multi-turn chat: each turn finds the earlier prompts and replies cached', async () => {
    const tails = [long().slice(200, 213), long().slice(300, 309), long().slice(400, 431)];
    let prompt = ref!.prompts[2].ids; // 37 tokens
    let computed = 0; // tokens whose K/V the previous turn computed (its prompt and all its reply but the last token)
    for (const [turn, tail] of tails.entries()) {
      const before = on.stats();
      const [a, b] = [await gen(on, prompt), await gen(off, prompt)];
      expect(outcome(a)).toEqual(outcome(b));
      expect(delta(on.stats(), before)).toEqual({
        queries: 1,
        queryTokens: prompt.length,
        hitTokens: turn === 0 ? 0 : reusable(computed, prompt.length),
      });
      computed = prompt.length + a.tokenIds.length - 1;
      prompt = [...prompt, ...a.tokenIds, ...tail];
    }
    expect(on.stats().prefixCacheHitTokens).toBeGreaterThan(100);
    expect(off.stats()).toMatchObject({ prefixCacheQueries: 0, prefixCacheHitTokens: 0, prefixCacheBlocks: 0 });
  });

  it('concurrent requests sharing a system prompt, computed together and then found cached', async () => {
    const system = long().slice(0, 100);
    const ask = (k: number): number[][] =>
      Array.from({ length: 6 }, (_, i) => [...system, ...long().slice(300 + 40 * i + k, 300 + 40 * i + k + 5 + 4 * i)]);
    for (const [round, prompts] of [ask(0), ask(17)].entries()) {
      const before = on.stats();
      const a = await Promise.all(prompts.map((p) => gen(on, p, { maxTokens: 12 })));
      const b = await Promise.all(prompts.map((p) => gen(off, p, { maxTokens: 12 })));
      expect(a.map(outcome)).toEqual(b.map(outcome));
      // Round 2: all six find at least the system prompt's 6 whole blocks.
      if (round === 1) expect(delta(on.stats(), before).hitTokens).toBeGreaterThanOrEqual(6 * 96);
    }
    expect(on.stats().kvBlocksUsed).toBe(0);
  });

  it('the same prompt again: cached to its end, its last block is computed again for its logits', async () => {
    for (const prompt of [long().slice(0, 64), long().slice(0, 70)]) {
      const first = await gen(on, prompt);
      const before = on.stats();
      const again = await gen(on, prompt);
      expect(delta(on.stats(), before).hitTokens).toBe(reusable(prompt.length, prompt.length)); // 48, then 64
      expect(outcome(again)).toEqual(outcome(first));
      expect(outcome(again)).toEqual(outcome(await gen(off, prompt)));
    }
  });

  it('seeded sampling draws the same tokens', async () => {
    const options = { temperature: 0.9, topP: 0.95, topK: 50, seed: 7, maxTokens: 24 };
    let prompt = long().slice(100, 140);
    for (let turn = 0; turn < 3; turn++) {
      const [a, b] = [await gen(on, prompt, options), await gen(off, prompt, options)];
      expect(outcome(a)).toEqual(outcome(b));
      prompt = [...prompt, ...a.tokenIds, ...long().slice(500 + turn * 7, 505 + turn * 7)];
    }
  });

  it('teacher forcing computes its whole prompt (it needs every position\'s logits), next to cached prefixes', async () => {
    const tokens = long().slice(0, 90); // its first blocks are cached by now
    const before = on.stats();
    const [a, b] = [await on.score({ tokens }), await off.score({ tokens })];
    expect(a).toEqual(b);
    expect(delta(on.stats(), before)).toEqual({ queries: 0, queryTokens: 0, hitTokens: 0 });
    // Scored concurrently with generations that reuse the same prefix.
    const [s, g] = await Promise.all([on.score({ tokens }), gen(on, tokens)]);
    expect(s).toEqual(a);
    expect(outcome(g)).toEqual(outcome(await gen(off, tokens)));
  });

  it('an abort leaves its cached blocks to the next request, and holds nothing', async () => {
    const prompt = [...long().slice(0, 48), ...long().slice(250, 262)];
    const expected = outcome(await gen(off, prompt, { maxTokens: 30 }));
    const victim = on.generate({ tokens: prompt }, { maxTokens: 10_000, stopTokenIds: [], highWaterMark: 8 });
    victim[Symbol.asyncIterator](); // never read: held at 8 tokens, so only the abort ends it, however late JS runs
    let seen = 0;
    victim.on('token', () => {
      if (++seen === 5) victim.abort();
    });
    const v = await victim;
    expect(v.finishReason).toBe('abort');
    expect(on.stats().kvBlocksUsed).toBe(0);
    expect(on.stats().prefixCacheBlocks).toBeGreaterThan(0);
    const before = on.stats();
    const r = await gen(on, prompt, { maxTokens: 30 });
    expect(delta(on.stats(), before).hitTokens).toBe(reusable(prompt.length, prompt.length)); // all but its last block
    expect(outcome(r)).toEqual(expected);
    expect(on.stats().kvBlocksUsed).toBe(0);
  });

  it('a KV pool too small for the load: cached blocks are evicted, requests preempted, outputs unchanged', async () => {
    const probe = on.stats();
    const perToken = probe.kvCacheBytes / (probe.kvBlocksTotal * probe.kvBlockSize);
    const options = { device: 'cpu', threads: 2, maxContext: 256, maxBatchTokens: 64, kvCacheBytes: Math.ceil(perToken * 320) } as const;
    const small = await Engine.load(fixtureDir(name!), options);
    const smallOff = await Engine.load(fixtureDir(name!), { ...options, prefixCaching: false });
    try {
      const system = long().slice(0, 40);
      const prompts = Array.from({ length: 8 }, (_, i) => [...system, ...long().slice(100 + 30 * i, 100 + 30 * i + 3 + 9 * i)]);
      for (let round = 0; round < 2; round++) {
        const a = await Promise.all(prompts.map((p) => gen(small, p, { maxTokens: 60 })));
        const b = await Promise.all(prompts.map((p) => gen(smallOff, p, { maxTokens: 60 })));
        expect(a.map(outcome)).toEqual(b.map(outcome));
      }
      const s = small.stats();
      expect(s.preemptions).toBeGreaterThan(0);
      expect(s.prefixCacheEvictions).toBeGreaterThan(0);
      expect(s.prefixCacheHitTokens).toBeGreaterThan(0);
      expect(s.kvBlocksUsed).toBe(0);
      expect(s.prefixCacheBlocks).toBeLessThanOrEqual(s.kvBlocksTotal);
      expect(smallOff.stats().preemptions).toBeGreaterThan(0);
    } finally {
      await Promise.all([small.dispose(), smallOff.dispose()]);
    }
  });

  it('dispose with cached blocks and requests in flight ends them as usual', async () => {
    const engine = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2 });
    const prompt = long().slice(0, 80);
    await gen(engine, prompt);
    const live = [prompt, [...prompt, 5, 6, 7]].map((p) => engine.generate({ tokens: p }, { maxTokens: 10_000, stopTokenIds: [] }));
    await Promise.all(live.map((g) => new Promise((r) => g.once('token', r))));
    // The same prompt reuses all but its last block (64 of 80 tokens); the longer one all 80, as the first computed them.
    expect(engine.stats().prefixCacheHitTokens).toBe(64 + 80);
    await engine.dispose();
    for (const r of await Promise.all(live)) expect(r.finishReason).toBe('abort');
  });
});

// A model with recurrent layers (Qwen3.5's Gated DeltaNet) keeps a state per sequence that cached K/V blocks cannot
// restore: by default it runs without the cache (no lookups, outputs as with it off), and asking for it is refused.
const hybrids = listFixtures().filter(hasRecurrentLayers);
describe.skipIf(hybrids.length === 0)('prefix caching and models with recurrent layers', () => {
  it.each(hybrids)('%s: off by default, no lookups; prefixCaching: true refused', async (hybrid) => {
    const engine = await Engine.load(fixtureDir(hybrid), { device: 'cpu', threads: 2 });
    try {
      const prompt = readReference(hybrid).prompts[0]!.ids;
      const a = await engine.generate({ tokens: prompt }, { maxTokens: 8, stopTokenIds: [] });
      const b = await engine.generate({ tokens: prompt }, { maxTokens: 8, stopTokenIds: [] });
      expect(b.tokenIds).toEqual(a.tokenIds);
      expect(engine.stats().prefixCacheQueries).toBe(0);
    } finally {
      await engine.dispose();
    }
    await expect(Engine.load(fixtureDir(hybrid), { device: 'cpu', threads: 2, prefixCaching: true })).rejects.toMatchObject({
      code: 'ERR_INVALID_OPTION',
      message: expect.stringMatching(/prefixCaching is not available .*recurrent layers/),
    });
  });
});

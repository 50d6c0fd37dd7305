// Prefix caching on the CPU's default (SIMD) matmul path: the same greedy ids with the cache on and off, and logprobs
// equal to rounding. Here a position's K/V depend by a few ulps on the step that computed it (a GEMV for steps of up to
// 8 rows, a packed kernel above: see prefix-cache.test.ts, which checks bit-equality on the scalar path), so a turn
// that reuses the K/V its reply got from decode steps differs in the last bits from one that prefills the same
// tokens, as batching already makes requests differ. Every fixture, a multi-turn chat and a shared system prompt.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine, type GenerationResult } from '../../lib/index.js';
import { fixtureDir, hasRecurrentLayers, listFixtures, readReference } from '../helpers/fixtures.js';

// (models with recurrent layers run without the cache: prefix-cache.test.ts checks that)
const fixtures = listFixtures().filter((f) => !hasRecurrentLayers(f) && readReference(f).prompts.some((p) => p.ids.length >= 600));

function expectClose(a: GenerationResult, b: GenerationResult): void {
  expect(a.tokenIds).toEqual(b.tokenIds);
  expect(a.finishReason).toBe(b.finishReason);
  a.logprobs!.forEach((lp, i) => {
    expect(Math.abs(lp.logprob - b.logprobs![i].logprob)).toBeLessThan(1e-4);
    expect(lp.top.map((t) => t.tokenId)).toEqual(b.logprobs![i].top.map((t) => t.tokenId));
  });
}

describe.each(fixtures)('prefix caching on the SIMD path: %s', (name) => {
  const long = readReference(name).prompts.find((p) => p.ids.length >= 600)!.ids;
  let on: Engine;
  let off: Engine;
  const gen = (e: Engine, tokens: number[]): PromiseLike<GenerationResult> =>
    e.generate({ tokens }, { maxTokens: 16, stopTokenIds: [], logprobs: 2 });

  beforeAll(async () => {
    on = await Engine.load(fixtureDir(name), { device: 'cpu', threads: 2 });
    off = await Engine.load(fixtureDir(name), { device: 'cpu', threads: 2, prefixCaching: false });
  });
  afterAll(async () => {
    await Promise.all([on?.dispose(), off?.dispose()]);
  });

  it('a multi-turn chat', async () => {
    let prompt = long.slice(0, 37);
    for (let turn = 0; turn < 3; turn++) {
      const [a, b] = [await gen(on, prompt), await gen(off, prompt)];
      expectClose(a, b);
      prompt = [...prompt, ...a.tokenIds, ...long.slice(200 + 50 * turn, 211 + 50 * turn)];
    }
    expect(on.stats().prefixCacheHitTokens).toBeGreaterThan(0);
  });

  it('concurrent requests sharing a system prompt', async () => {
    const prompts = Array.from({ length: 5 }, (_, i) => [...long.slice(0, 70), ...long.slice(400 + 30 * i, 409 + 31 * i)]);
    for (let round = 0; round < 2; round++) {
      const a = await Promise.all(prompts.map((p) => gen(on, p)));
      const b = await Promise.all(prompts.map((p) => gen(off, p)));
      a.forEach((r, i) => expectClose(r, b[i]));
    }
    expect(on.stats().kvBlocksUsed).toBe(0);
  });
});

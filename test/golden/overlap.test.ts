// The overlapped greedy decode's bookkeeping (cuda/src/engine.cpp, Engine::step_overlapped) on the CPU fixtures. On a
// GPU the engine launches the next decode step before it reads the picks of the one before, so a stop token or a
// length is found while the step after it already runs. VT_CPU_OVERLAP=1 makes the CPU decoder chain plain-greedy
// decode steps the same way (each step runs at once there, so nothing overlaps; the engine's side is what is tested):
// which steps chain, requests ending inside a chain, aborts while a step is in flight. Each test file runs in its own
// process (vitest.config.ts: forks), so the variable stays here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { decisiveSteps, fixtureDir, listFixtures, readReference } from '../helpers/fixtures.js';

const fixtures = listFixtures();
const name = fixtures.includes('qwen3-bf16-sharded') ? 'qwen3-bf16-sharded' : fixtures[0];

async function load(dir: string, overlap: boolean): Promise<Engine> {
  process.env.VT_CPU_OVERLAP = overlap ? '1' : '0';  // read when the engine loads
  try {
    return await Engine.load(dir, { device: 'cpu', threads: 2 });
  } finally {
    delete process.env.VT_CPU_OVERLAP;
  }
}

// Once every request has settled: the engine holds nothing and generated exactly the tokens it delivered (a finished
// sequence's row of a chained step must be dropped, not appended). A sequence that ended while the step after it ran
// is removed when that step is collected, a step later than its finish event: wait for it (at most 2 s).
async function settled(engine: Engine, tokensBefore: number, delivered: number): Promise<void> {
  for (let t = 0; t < 400 && engine.stats().requestsRunning > 0; ++t) await new Promise((r) => setTimeout(r, 5));
  const s = engine.stats();
  expect(s.requestsRunning).toBe(0);
  expect(s.kvBlocksUsed).toBe(0);
  expect(s.tokensGenerated - tokensBefore).toBe(delivered);
}

describe.skipIf(!name)('overlapped greedy decode (VT_CPU_OVERLAP=1)', () => {
  const ref = name ? readReference(name) : undefined;
  let chained: Engine;
  let plain: Engine;
  beforeAll(async () => {
    chained = await load(fixtureDir(name!), true);
    plain = await load(fixtureDir(name!), false);
  });
  afterAll(async () => {
    await Promise.all([chained?.dispose(), plain?.dispose()]);
  });

  it("greedy ids equal transformers' up to the first close call", async () => {
    for (const p of ref!.prompts) {
      const r = await chained.generate({ tokens: p.ids }, { maxTokens: p.greedy.length, stopTokenIds: [] });
      const n = decisiveSteps(p, 1e-3);
      expect(r.tokenIds.slice(0, n)).toEqual(p.greedy.slice(0, n));
      expect(r.finishReason).toBe('length');
    }
  });

  it('concurrent requests ending at their own lengths and stop tokens give what the unchained engine gives', async () => {
    const prompts = ref!.prompts.map((p) => p.ids);
    // Each request's own stop token: a token its reply reaches part way (the request must end right after it, while
    // the chained step after it already ran), or none; lengths from 3 to 24, so requests end at different steps.
    const solo = await Promise.all(
      prompts.map((tokens) => plain.generate({ tokens }, { maxTokens: 24, stopTokenIds: [] })),
    );
    const options = prompts.flatMap((_, i) =>
      [0, 1, 2].map((k) => ({
        i,
        maxTokens: 3 + ((5 * i + 7 * k) % 22),
        stopTokenIds: k === 1 ? [solo[i].tokenIds[(2 * i + 3) % solo[i].tokenIds.length]] : [],
      })),
    );
    const run = (engine: Engine) =>
      Promise.all(
        options.map(({ i, maxTokens, stopTokenIds }) => engine.generate({ tokens: prompts[i] }, { maxTokens, stopTokenIds })),
      );
    const before = chained.stats().tokensGenerated;
    const [got, want] = [await run(chained), await run(plain)];
    expect(got.map((r) => [r.tokenIds, r.finishReason])).toEqual(want.map((r) => [r.tokenIds, r.finishReason]));
    expect(want.some((r) => r.finishReason === 'stop')).toBe(true);
    await settled(chained, before, got.reduce((n, r) => n + r.tokenIds.length, 0));
  });

  it('a stop token found while the step after it runs ends the request there', async () => {
    // Past the prompt every step of a lone request (or a pair) chains, so a stop token some steps in is found while
    // the next step already runs: that step's row is dropped.
    const before = chained.stats().tokensGenerated;
    let delivered = 0;
    for (const [i, p] of ref!.prompts.entries()) {
      const solo = (await plain.generate({ tokens: p.ids }, { maxTokens: 24, stopTokenIds: [] })).tokenIds;
      const stopTokenIds = [solo[Math.min(6 + i, solo.length - 1)]];
      const want = await plain.generate({ tokens: p.ids }, { maxTokens: 24, stopTokenIds });
      const [got, beside] = await Promise.all([
        chained.generate({ tokens: p.ids }, { maxTokens: 24, stopTokenIds }),
        chained.generate({ tokens: p.ids }, { maxTokens: 24, stopTokenIds: [] }),
      ]);
      expect([got.tokenIds, got.finishReason]).toEqual([want.tokenIds, want.finishReason]);
      expect(got.finishReason).toBe('stop');
      expect(beside.tokenIds).toEqual(solo);
      delivered += got.tokenIds.length + beside.tokenIds.length;
    }
    await settled(chained, before, delivered);
  });

  it('an abort while its step is in flight ends the request once, and the others go on', async () => {
    const prompt = ref!.prompts[0].ids;
    const expected = (await plain.generate({ tokens: prompt }, { maxTokens: 30, stopTokenIds: [] })).tokenIds;
    const before = chained.stats().tokensGenerated;
    const controller = new AbortController();
    const victim = chained.generate({ tokens: prompt }, { maxTokens: 10_000, stopTokenIds: [], signal: controller.signal });
    const bystander = chained.generate({ tokens: prompt }, { maxTokens: 30, stopTokenIds: [] });
    let seen = 0;
    victim.on('token', () => {
      if (++seen === 4) controller.abort();
    });
    const [v, b] = await Promise.all([victim, bystander]);
    expect(v.finishReason).toBe('abort');
    expect(v.tokenIds.length).toBeGreaterThanOrEqual(4);
    const n = Math.min(v.tokenIds.length, expected.length);  // (the abort lands a step or two after the 4th token)
    expect(v.tokenIds.slice(0, n)).toEqual(expected.slice(0, n));
    expect(b.tokenIds).toEqual(expected);
    expect(b.finishReason).toBe('length');
    await settled(chained, before, v.tokenIds.length + b.tokenIds.length);
  });
});

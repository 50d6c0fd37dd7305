// Abort ends one request, frees its KV blocks, and leaves the others untouched.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { fixtureDir, listFixtures, readReference } from '../helpers/fixtures.js';

const fixtures = listFixtures();
const name = fixtures.includes('qwen3-bf16-sharded') ? 'qwen3-bf16-sharded' : fixtures[0];

describe.skipIf(!name)('abort', () => {
  let engine: Engine;
  let prompt: number[];
  let expected: number[];
  beforeAll(async () => {
    engine = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2 });
    prompt = readReference(name!).prompts[3].ids;
    expected = (await engine.generate({ tokens: prompt }, { maxTokens: 40, stopTokenIds: [] })).tokenIds;
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it('an AbortSignal ends its request with the partial result; others continue', async () => {
    const controller = new AbortController();
    const victim = engine.generate({ tokens: prompt }, { maxTokens: 10_000, stopTokenIds: [], signal: controller.signal, highWaterMark: 8 });
    // An iterator nobody reads holds it at 8 tokens, so only the abort can end it: a JS thread that stalls past the
    // few ms the whole context takes would otherwise see it end by its length first.
    victim[Symbol.asyncIterator]();
    const bystander = engine.generate({ tokens: prompt }, { maxTokens: 40, stopTokenIds: [] });
    let seen = 0;
    victim.on('token', () => {
      if (++seen === 3) controller.abort();
    });
    const [v, b] = await Promise.all([victim, bystander]);
    expect(v.finishReason).toBe('abort');
    expect(v.tokenIds.length).toBeGreaterThanOrEqual(3);
    expect(v.tokenIds.length).toBeLessThan(10_000);
    expect(v.tokenIds).toEqual(expected.slice(0, v.tokenIds.length));
    expect(b.finishReason).toBe('length');
    expect(b.tokenIds).toEqual(expected);
    expect(engine.stats().kvBlocksUsed).toBe(0);
  });

  it('breaking out of for-await aborts the request and frees its blocks', async () => {
    const bystander = engine.generate({ tokens: prompt }, { maxTokens: 40, stopTokenIds: [] });
    const victim = engine.generate({ tokens: prompt }, { maxTokens: 10_000, stopTokenIds: [] });
    const got: number[] = [];
    for await (const chunk of victim) {
      got.push(...chunk.tokenIds);
      if (got.length >= 2) break;
    }
    const v = await victim;
    expect(v.finishReason).toBe('abort');
    expect(v.tokenIds.slice(0, got.length)).toEqual(got);
    const b = await bystander;
    expect(b.tokenIds).toEqual(expected);
    // The abort reaches the step thread asynchronously; once both requests are settled nothing holds blocks.
    expect(engine.stats().kvBlocksUsed).toBe(0);
    expect(engine.stats().requestsRunning).toBe(0);
  });

  it('an already-aborted signal never starts the request', async () => {
    const controller = new AbortController();
    controller.abort();
    const r = await engine.generate({ tokens: prompt }, { maxTokens: 5, signal: controller.signal });
    expect(r.finishReason).toBe('abort');
    expect(r.tokenIds).toEqual([]);
  });
});

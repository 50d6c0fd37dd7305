// Continuous batching must not change what a request generates: 8 concurrent requests of different prompt
// lengths give exactly the tokens each gives alone, with chunked prefill mixing prompts and decodes in a step,
// and again with a KV pool so small that the scheduler must preempt and recompute. On a dense fixture and on each
// with recurrent layers (Qwen3.5's Gated DeltaNet: a preempted request's state is recomputed from its tokens).
import { afterAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { fixtureDir, hasRecurrentLayers, listFixtures, readReference } from '../helpers/fixtures.js';

const fixtures = listFixtures();
const dense = fixtures.includes('llama-bf16') ? 'llama-bf16' : fixtures[0];
const names = dense ? [dense, ...fixtures.filter(hasRecurrentLayers)] : [];

describe.each(names)('batching: %s', (name) => {
  const ref = name ? readReference(name) : undefined;
  const engines: Engine[] = [];
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.dispose()));
  });

  // Eight prompts of different lengths, cut from the fixture's longest prompt.
  function prompts(): number[][] {
    const long = ref!.prompts.reduce((a, b) => (b.ids.length > a.ids.length ? b : a)).ids;
    return [1, 3, 17, 64, 129, 250, 400, long.length - 8].map((n, i) => long.slice(i, i + n));
  }

  async function alone(engine: Engine, tokens: number[]): Promise<number[]> {
    return (await engine.generate({ tokens }, { maxTokens: 20, stopTokenIds: [] })).tokenIds;
  }

  for (const [label, options] of [
    ['chunked prefill mixed with decodes', { maxBatchTokens: 64 }],
    ['a KV pool that forces preemption', { maxBatchTokens: 128, maxContext: 640, kvCacheBytes: 0 }],
  ] as const) {
    it(`8 concurrent requests equal each alone: ${label}`, async () => {
      const dir = fixtureDir(name);
      let loadOptions: Record<string, number> = { ...options };
      if ('kvCacheBytes' in options) {
        // Room for just over one maxContext sequence: 8 long-ish prompts cannot all stay resident.
        const probe = await Engine.load(dir, { device: 'cpu', threads: 2, maxContext: 640 });
        const s = probe.stats();
        // (the KV pool's bytes per token: without a hybrid model's state slots, which are per seat)
        const slots = (await probe.memory()).engine.kvCache.stateSlotBytes;
        const perToken = (s.kvCacheBytes - slots) / (s.kvBlocksTotal * s.kvBlockSize);
        await probe.dispose();
        loadOptions = { ...options, kvCacheBytes: Math.ceil(perToken * 700) };
      }
      const engine = await Engine.load(dir, { device: 'cpu', threads: 2, ...loadOptions });
      engines.push(engine);
      const ps = prompts();
      const solo: number[][] = [];
      for (const p of ps) solo.push(await alone(engine, p));
      const together = await Promise.all(ps.map((p) => alone(engine, p)));
      expect(together).toEqual(solo);
      if ('kvCacheBytes' in options) expect(engine.stats().preemptions).toBeGreaterThan(0);
      expect(engine.stats().kvBlocksUsed).toBe(0);
    });
  }
});

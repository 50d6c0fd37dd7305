// Teacher-forced scoring equals the logprobs transformers computed for the same tokens: the references' greedy
// continuations give us, for free, sequences whose per-step top-1 logprobs are known in float64.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { fixtureDir, listFixtures, readReference } from '../helpers/fixtures.js';

const fixtures = listFixtures();
const name = fixtures.includes('qwen2-f16') ? 'qwen2-f16' : fixtures[0];

describe.skipIf(!name)('score (teacher forcing)', () => {
  let engine: Engine;
  beforeAll(async () => {
    // A small batch budget, so long prompts are scored across several chunks.
    engine = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2, maxBatchTokens: 48 });
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it('gives each greedy token the logprob the reference gave it', async () => {
    for (const p of readReference(name!).prompts) {
      const tokens = [...p.ids, ...p.greedy];
      const { logprobs, meanNll, perplexity } = await engine.score({ tokens });
      expect(logprobs).toHaveLength(tokens.length - 1);
      // tokens[ids.length + s] is greedy[s]; the reference's top-1 logprob at step s is its logprob.
      for (let s = 0; s < p.greedy.length; s++) {
        expect(Math.abs(logprobs[p.ids.length - 1 + s] - p.top_logprobs[s][0])).toBeLessThanOrEqual(2e-3);
      }
      expect(meanNll).toBeCloseTo(-logprobs.reduce((a, b) => a + b, 0) / logprobs.length, 10);
      expect(perplexity).toBeCloseTo(Math.exp(meanNll), 10);
    }
    expect(engine.stats().kvBlocksUsed).toBe(0);
  });

  it('scores alongside generations without changing them', async () => {
    const p = readReference(name!).prompts[4];
    const [g, s] = await Promise.all([
      engine.generate({ tokens: p.ids }, { maxTokens: 24, stopTokenIds: [] }),
      engine.score({ tokens: [...p.ids, ...p.greedy] }),
    ]);
    expect(g.tokenIds).toEqual(p.greedy);
    expect(s.logprobs).toHaveLength(p.ids.length + p.greedy.length - 1);
  });

  it('rejects a single token', async () => {
    await expect(engine.score({ tokens: [5] })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
  });
});

describe.skipIf(!name)('logit bias', () => {
  it('banning the reference top-1 token makes greedy pick its top-2', async () => {
    const engine = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2 });
    try {
      for (const p of readReference(name!).prompts) {
        const [top1, top2] = p.top_ids[0];
        const r = await engine.generate(
          { tokens: p.ids },
          { maxTokens: 1, stopTokenIds: [], logitBias: { [top1]: -Infinity } } as never,
        );
        expect(r.tokenIds).toEqual([top2]);
      }
    } finally {
      await engine.dispose();
    }
  });
});

describe.skipIf(!name)('score at the edge of the context', () => {
  it('takes exactly maxContext tokens and refuses one more', async () => {
    const engine = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 1, maxContext: 64 });
    try {
      const ids = readReference(name!).prompts[4].ids;
      const full = await engine.score({ tokens: ids.slice(0, 64) });
      expect(full.logprobs).toHaveLength(63);
      const shorter = await engine.score({ tokens: ids.slice(0, 40) });
      // Causality: the first 39 logprobs cannot depend on what comes after.
      for (let i = 0; i < 39; i++) expect(full.logprobs[i]).toBeCloseTo(shorter.logprobs[i], 5);
      await expect(engine.score({ tokens: ids.slice(0, 65) })).rejects.toMatchObject({ code: 'ERR_CONTEXT_OVERFLOW' });
    } finally {
      await engine.dispose();
    }
  });
});

// Sampling through the whole engine, against transformers' float64 distribution of the first generated token:
// at temperature 1 the frequencies of the reference top-5 tokens (and of "anything else") match the softmax
// (chi-square), truncations never emit an excluded token, and a seed fixes the tokens even inside a batch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { fixtureDir, listFixtures, readReference, type ReferencePrompt } from '../helpers/fixtures.js';

const name = listFixtures().includes('llama-bf16') ? 'llama-bf16' : listFixtures()[0];
const CHI2_999_DF5 = 20.515; // 0.999 quantile of chi-square with 5 degrees of freedom (standard tables)

describe.skipIf(!name)('sampling against the reference distribution', () => {
  let engine: Engine;
  let prompt: ReferencePrompt;
  beforeAll(async () => {
    engine = await Engine.load(fixtureDir(name!), { device: 'cpu', threads: 2, maxSeqs: 256, maxBatchTokens: 4096 });
    // The prompt whose first-step distribution is the most spread out makes the strongest test.
    prompt = readReference(name!).prompts.reduce((a, b) => (Math.exp(b.top_logprobs[0][0]) < Math.exp(a.top_logprobs[0][0]) ? b : a));
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  async function firstTokens(n: number, options: Record<string, unknown>): Promise<number[]> {
    const gens = Array.from({ length: n }, (_, i) =>
      engine.generate({ tokens: prompt.ids }, { maxTokens: 1, stopTokenIds: [], seed: 1000 + i, ...options }),
    );
    return (await Promise.all(gens)).map((r) => r.tokenIds[0]);
  }

  it('temperature 1: frequencies match the float64 softmax (chi-square, p = 0.001)', async () => {
    const N = 3000;
    const draws = await firstTokens(N, { temperature: 1 });
    const probs = prompt.top_logprobs[0].map(Math.exp);
    const expected = [...probs, 1 - probs.reduce((a, b) => a + b, 0)].map((p) => p * N);
    const observed = new Array(6).fill(0);
    for (const t of draws) {
      const k = prompt.top_ids[0].indexOf(t);
      observed[k < 0 ? 5 : k]++;
    }
    const chi2 = observed.reduce((s, o, k) => s + (o - expected[k]) ** 2 / expected[k], 0);
    expect(Math.min(...expected)).toBeGreaterThan(5); // the test's own validity condition
    expect(chi2, `observed ${observed} expected ${expected.map((e) => e.toFixed(1))}`).toBeLessThan(CHI2_999_DF5);
  });

  it('top-k, top-p and min-p never emit an excluded token', async () => {
    const [ids, lps] = [prompt.top_ids[0], prompt.top_logprobs[0]];
    const p = lps.map(Math.exp);
    expect(new Set(await firstTokens(400, { temperature: 1, topK: 2 }))).toSatisfy((s: Set<number>) =>
      [...s].every((t) => ids.slice(0, 2).includes(t)),
    );
    // The smallest nucleus holding 80% of the mass, when the reference top-5 holds it.
    const cum = p.map((_, i) => p.slice(0, i + 1).reduce((a, b) => a + b, 0));
    const k = cum.findIndex((c) => c >= 0.8);
    if (k >= 0) {
      const got = await firstTokens(400, { temperature: 1, topP: 0.8 });
      expect(got.every((t) => ids.slice(0, k + 1).includes(t))).toBe(true);
    }
    const minP = (p[1] / p[0] + 1) / 2; // keeps the top token, drops the second and everything below
    const got = await firstTokens(200, { temperature: 1, minP });
    expect(new Set(got)).toEqual(new Set([ids[0]]));
  });

  it('the same seed gives the same tokens, alone or in a batch; another seed differs', async () => {
    const opts = { maxTokens: 24, temperature: 1.2, stopTokenIds: [] };
    const alone = (await engine.generate({ tokens: prompt.ids }, { ...opts, seed: 42 })).tokenIds;
    const batch = await Promise.all([
      engine.generate({ tokens: prompt.ids }, { ...opts, seed: 7 }),
      engine.generate({ tokens: prompt.ids }, { ...opts, seed: 42 }),
      engine.generate({ tokens: prompt.ids.slice(1) }, { ...opts, seed: 42 }),
    ]);
    expect(batch[1].tokenIds).toEqual(alone);
    expect(batch[0].tokenIds).not.toEqual(alone);
  });
});

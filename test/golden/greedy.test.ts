// Token-exactness against transformers: every fixture's float64 reference (scripts/make_fixtures.py) replayed on
// the CPU backend. Greedy ids must match up to the first step whose reference top-1/top-2 margin is < 1e-3
// (below that, fp32 rounding may legitimately pick the other token), and top-5 logprobs within 2e-3 up to there.
// The rules are test/helpers/golden-rules.mjs's, which scripts/package-check.sh applies too (golden-check.mjs).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { decisiveSteps, fixtureDir, listFixtures, logprobSteps, MIN_MARGIN, readReference } from '../helpers/fixtures.js';
import { expectTopLogprobs } from '../helpers/golden-expect.js';

const fixtures = listFixtures();

describe.skipIf(fixtures.length === 0)('golden greedy decoding on the CPU', () => {
  for (const name of fixtures) {
    describe(name, () => {
      const ref = readReference(name);
      let engine: Engine;
      beforeAll(async () => {
        engine = await Engine.load(fixtureDir(name), { device: 'cpu', threads: 2 });
      });
      afterAll(async () => {
        await engine?.dispose();
      });

      it('loads the architecture the reference names', () => {
        expect(engine.modelInfo.architecture).toBe(ref.architecture);
        expect(engine.modelInfo.dtype).toBe(ref.dtype);
      });

      for (const [i, prompt] of ref.prompts.entries()) {
        it(`prompt ${i} (${prompt.ids.length} tokens)`, async () => {
          const result = await engine.generate(
            { tokens: prompt.ids },
            { maxTokens: prompt.greedy.length, temperature: 0, logprobs: 5, stopTokenIds: [] },
          );
          expect(result.finishReason).toBe('length');
          expect(result.usage).toEqual({ promptTokens: prompt.ids.length, completionTokens: prompt.greedy.length });
          const n = decisiveSteps(prompt, MIN_MARGIN);
          expect(result.tokenIds.slice(0, n)).toEqual(prompt.greedy.slice(0, n));
          // Logprobs are comparable while the contexts agree: through step n (its own distribution still is).
          for (let s = 0; s < logprobSteps(prompt, n); s++) expectTopLogprobs(prompt, s, result.logprobs![s]);
        });
      }
    });
  }
});

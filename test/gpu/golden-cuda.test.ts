// The golden check on the GPU: every fixture's transformers reference replayed with device 'cuda' and fp32
// activations (activationDtype 'float32'; the default, bf16, is held to transformers' own bf16 error by
// test/gpu/golden_cuda.cpp) under the CPU's tolerances (test/golden/greedy.test.ts): greedy ids
// equal up to the first reference margin < 1e-3, top-5 logprobs within 2e-3 through that step; and batching
// (concurrent requests give the tokens each gives alone, up to the same step). Skipped when the engine answers
// ERR_NO_GPU (no driver, no GPU, or an addon built without kernels), which is what CI sees.
// scripts/gpu-check.sh runs the same checks (and bf16 activations) without Node: test/gpu/golden_cuda.cpp.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { decisiveSteps, fixtureDir, listFixtures, logprobSteps, MIN_MARGIN, readReference } from '../helpers/fixtures.js';
import { expectTopLogprobs } from '../helpers/golden-expect.js';

const fixtures = listFixtures();

async function gpuUsable(): Promise<boolean> {
  if (fixtures.length === 0) return false;
  try {
    const e = await Engine.load(fixtureDir(fixtures[0]), { device: 'cuda' });
    await e.dispose();
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_NO_GPU') return false;
    throw err;
  }
}
const hasGpu = await gpuUsable();

describe.skipIf(!hasGpu)('golden greedy decoding on the GPU (float32 activations)', () => {
  for (const name of fixtures) {
    describe(name, () => {
      const ref = readReference(name);
      let engine: Engine;
      beforeAll(async () => {
        engine = await Engine.load(fixtureDir(name), { device: 'cuda', activationDtype: 'float32' });
      });
      afterAll(async () => {
        await engine?.dispose();
      });

      it('runs on the GPU, weights in device memory', async () => {
        expect(engine.modelInfo.device).toBe('cuda');
        expect(engine.modelInfo.architecture).toBe(ref.architecture);
      });

      it('reports the GPU: driver figures, and NVML bytes or why not', async () => {
        const tracker = engine.trackMemory({ intervalMs: 10 });
        const { gpu, engine: held, reasons } = await engine.memory();
        const peaks = tracker.stop();
        expect(gpu?.devices).toHaveLength(1);
        const d = gpu!.devices[0]!;
        expect(d.index).toBe(0);
        expect(d.name).toMatch(/\S/);
        expect(d.freeBytes).not.toBeNull();
        expect(d.freeBytes!).toBeLessThanOrEqual(d.totalBytes - held.totalBytes);
        if (d.processBytes === null) {
          // NVML missing, "not available" (unified memory) or a container's pid namespace: said, not thrown.
          expect(d.processBytesReason).toMatch(/NVML/);
          expect(reasons.gpu).toContain(d.processBytesReason);
          expect(peaks.reasons.gpu).toMatch(/NVML/);
        } else {
          // The engine's device allocations plus the CUDA context and cuBLASLt's workspace.
          expect(d.processBytes).toBeGreaterThanOrEqual(held.totalBytes);
          expect(peaks.gpuBytes).toBeGreaterThanOrEqual(held.totalBytes);
        }
      });

      const alone: number[][] = [];
      for (const [i, prompt] of ref.prompts.entries()) {
        it(`prompt ${i} (${prompt.ids.length} tokens)`, async () => {
          const result = await engine.generate(
            { tokens: prompt.ids },
            { maxTokens: prompt.greedy.length, temperature: 0, logprobs: 5, stopTokenIds: [] },
          );
          expect(result.finishReason).toBe('length');
          alone[i] = result.tokenIds;
          const n = decisiveSteps(prompt, MIN_MARGIN);
          expect(result.tokenIds.slice(0, n)).toEqual(prompt.greedy.slice(0, n));
          for (let s = 0; s < logprobSteps(prompt, n); s++) expectTopLogprobs(prompt, s, result.logprobs![s]);
        });
      }

      it('concurrent requests give what each gives alone', async () => {
        const runs = await Promise.all(
          Array.from({ length: 32 }, (_, k) => {
            const i = k % ref.prompts.length;
            const p = ref.prompts[i];
            return engine
              .generate({ tokens: p.ids }, { maxTokens: p.greedy.length, temperature: 0, stopTokenIds: [] })
              .then((r) => ({ i, ids: r.tokenIds }));
          }),
        );
        for (const { i, ids } of runs) {
          const n = decisiveSteps(ref.prompts[i], MIN_MARGIN);
          expect(ids.slice(0, n)).toEqual(alone[i].slice(0, n));
        }
      });
    });
  }
});

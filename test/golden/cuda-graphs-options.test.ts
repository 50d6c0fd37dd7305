// The cudaGraphs load option from JS to the engine's checks: the CPU backend accepts every form of it and ignores
// it (the same tokens, no graphs held), and what the TS validation would have refused, handed to the addon
// directly, is refused by the binding or by plan_memory with ERR_INVALID_OPTION naming the field — which also
// shows that each field reaches vt_cuda_graphs. What the CUDA backend does with it is checked on the GPU.
import { afterAll, describe, expect, it } from 'vitest';

import { validateLoadOptions } from '../../lib/engine/load-options.js';
import { Engine, type LoadOptions } from '../../lib/index.js';
import { type NativeCudaGraphs, nativeAddon } from '../../lib/native/addon.js';
import { randomCheckpoint, removeTempDirs } from '../helpers/checkpoints.js';

afterAll(removeTempDirs);

const dir = randomCheckpoint('tiny-qwen3', 'bfloat16');
const prompts = [[5, 6, 7], [9, 10, 11, 12, 13, 14, 15], [20]];

async function tokensWith(cudaGraphs: LoadOptions['cudaGraphs']): Promise<{ ids: number[][]; graphs: number }> {
  const engine = await Engine.load(dir, { device: 'cpu', threads: 1, maxSeqs: 4, cudaGraphs });
  try {
    const ids = await Promise.all(
      prompts.map(async (tokens) => (await engine.generate({ tokens }, { maxTokens: 8, stopTokenIds: [] })).tokenIds),
    );
    return { ids, graphs: (await engine.memory()).engine.graphs.count };
  } finally {
    await engine.dispose();
  }
}

/**
 * What vt_engine_estimate says of the CPU defaults with `cudaGraphs` as given, past the TS validation. Async, so
 * that what the binding throws at once (while it reads the params) arrives as a rejection too.
 */
async function estimateWith(cudaGraphs: Partial<NativeCudaGraphs> | undefined, maxSeqs = 0): Promise<unknown> {
  const params = { ...validateLoadOptions({ device: 'cpu' }), maxSeqs };
  return nativeAddon().estimate(dir, { ...params, cudaGraphs: cudaGraphs as NativeCudaGraphs });
}

describe('cudaGraphs on the CPU backend', () => {
  it('is accepted in every form and changes nothing', async () => {
    const base = await tokensWith(undefined);
    expect(base.graphs).toBe(0);
    for (const cudaGraphs of [
      false,
      true,
      { enabled: false },
      { maxBatch: 2 },
      { buckets: [1, 3], maxBatch: 4, dedup: true },
      { capture: 'first-use' as const },
    ]) {
      const got = await tokensWith(cudaGraphs);
      expect(got.ids, JSON.stringify(cudaGraphs)).toStrictEqual(base.ids);
      expect(got.graphs).toBe(0);
    }
  });

  it('leaves gpuMemoryUtilization to the CUDA backend: the CPU pool is the default one', async () => {
    const plain = await Engine.estimate(dir, { device: 'cpu' });
    const share = await Engine.estimate(dir, { device: 'cpu', gpuMemoryUtilization: 0.5 });
    expect(share.kvCache).toStrictEqual(plain.kvCache);
    const engine = await Engine.load(dir, { device: 'cpu', threads: 1, gpuMemoryUtilization: 0.5 });
    await engine.dispose();
  });

  it('is accepted by Engine.estimate', async () => {
    const est = await Engine.estimate(dir, { device: 'cpu', cudaGraphs: { buckets: [1, 2, 64] } });
    expect(est.kvCache.bytes).toBeGreaterThan(0);
  });

  it('rejects bad values in TS before anything loads', async () => {
    const err = await Engine.load(dir, { device: 'cpu', cudaGraphs: { buckets: [1, 5] }, maxSeqs: 4 }).catch((e: unknown) => e);
    expect((err as { code?: string }).code).toBe('ERR_INVALID_OPTION');
    expect((err as Error).message).toMatch(/cudaGraphs\.buckets\[1\] is 5/);
  });
});

describe('cudaGraphs in the binding and the engine', () => {
  it('takes the defaults, off, and a params object without cudaGraphs', async () => {
    await expect(estimateWith({ enabled: -1, maxBatch: 0, buckets: [], dedup: false })).resolves.toBeDefined();
    await expect(estimateWith({ enabled: -1, maxBatch: 0, buckets: [], dedup: false, firstUse: true })).resolves.toBeDefined();
    await expect(estimateWith({ enabled: 0, maxBatch: 0, buckets: [], dedup: true })).resolves.toBeDefined();
    await expect(estimateWith(undefined)).resolves.toBeDefined();
    await expect(estimateWith({ enabled: 1, maxBatch: 4096, buckets: [1, 100, 200], dedup: false }, 200)).resolves.toBeDefined();
  });

  it.each<[string, Partial<NativeCudaGraphs>, number, RegExp]>([
    ['enabled 2', { enabled: 2 as never }, 0, /cudaGraphs\.enabled/],
    ['maxBatch 4097', { maxBatch: 4097 }, 0, /cudaGraphs\.maxBatch/],
    ['maxBatch -1', { maxBatch: -1 }, 0, /cudaGraphs\.maxBatch/],
    ['a bucket of 0', { buckets: [0] }, 0, /cudaGraphs\.buckets\[0\] is 0/],
    ['a bucket above the default maxSeqs', { buckets: [1, 257] }, 0, /cudaGraphs\.buckets\[1\] is 257.*maxSeqs \(256, its default on the GPU\)/],
    ['a bucket above maxSeqs', { buckets: [2, 9] }, 8, /cudaGraphs\.buckets\[1\] is 9.*maxSeqs \(8\)/],
    ['repeated buckets', { buckets: [4, 4] }, 0, /cudaGraphs\.buckets must be strictly ascending/],
    ['maxBatch below the largest bucket', { buckets: [4, 16], maxBatch: 8 }, 0, /cudaGraphs\.maxBatch 8 is below the largest bucket \(16\)/],
    ['33 buckets', { buckets: Array.from({ length: 33 }, (_, i) => i + 1) }, 64, /cudaGraphs\.buckets holds at most 32/],
    ['a bucket that is not a number', { buckets: ['1' as never] }, 0, /cudaGraphs\.buckets must hold numbers/],
    ['dedup that is not a boolean', { dedup: 1 as never }, 0, /cudaGraphs\.dedup/],
    ['firstUse that is not a boolean', { firstUse: 1 as never }, 0, /cudaGraphs\.firstUse must be a boolean/],
  ])('refuses %s with ERR_INVALID_OPTION', async (_what, bad, maxSeqs, message) => {
    const cudaGraphs = { enabled: -1, maxBatch: 0, buckets: [], dedup: false, ...bad } as NativeCudaGraphs;
    const err = await estimateWith(cudaGraphs, maxSeqs).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as { code?: string }).code).toBe('ERR_INVALID_OPTION');
    expect((err as Error).message).toMatch(message);
  });
});

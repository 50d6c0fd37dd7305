// Engine.estimate's arithmetic on top of the native sizing: totals by tier, `fits`, and suggestions that actually
// fit. "Fits" is checked against the rules vt_engine.h documents for vt_engine_load, restated here independently:
// the pool holds floor(kvCacheBytes / bytesPerToken) tokens cut to whole blocks (0 = max(maxContext, 4096) tokens
// rounded up to whole blocks), must hold maxContext tokens, and the host heap (weight copies + KV pool + workspaces on the CPU) must fit in
// MemAvailable. The golden test (test/golden/memory.test.ts) checks the same against the real native engine.
import { describe, expect, it } from 'vitest';

import { OutOfMemoryError, BadCheckpointError } from '../../lib/errors.js';
import { estimateMemory, toMemoryEstimate } from '../../lib/memory/estimate.js';
import type { NativeAddon, NativeEstimate, NativeLoadParams } from '../../lib/native/addon.js';

const GiB = 2 ** 30;
const PER_TOKEN = 229_376; // Qwen3-0.6B: 28 layers x 2 x 8 kv heads x 128 x fp32
const WORKSPACE = 83_997_184;
const HOST_WEIGHTS = 262_144;

function params(p: Partial<NativeLoadParams> = {}): NativeLoadParams {
  return { device: 'cpu', threads: 0, maxContext: 0, maxSeqs: 0, maxBatchTokens: 0, kvBlockSize: 0, kvCacheBytes: 0, ...p };
}

/** What the native estimate answers for params, by the documented rules. */
function native(p: NativeLoadParams, available: number, maxPositions = 40_960): NativeEstimate {
  const M = p.maxContext || Math.min(maxPositions, 8192);
  const bs = p.kvBlockSize || 16;
  const tokens = poolTokens(p, M);
  return {
    weightBytes: 1_192_099_840,
    weightDeviceBytes: 0,
    weightHostBytes: HOST_WEIGHTS,
    weightMappedBytes: 1_192_099_840,
    kvCacheBytes: tokens * PER_TOKEN,
    kvCacheTokens: tokens,
    kvCacheInitialBytes: tokens * PER_TOKEN, // the CPU's pool is fixed: all of it from the load
    kvCacheInitialTokens: tokens,
    workspaceBytes: WORKSPACE,
    maxContext: M,
    hostAvailableBytes: available,
    hostPinnedBytes: 0,
    stateSlotBytes: 0,
    weightSkippedBytes: 0,
    stateSlotInitialBytes: 0,
  };
  function poolTokens(q: NativeLoadParams, m: number): number {
    if (q.kvCacheBytes > 0) return Math.floor(Math.floor(q.kvCacheBytes / PER_TOKEN) / bs) * bs;
    return Math.ceil(Math.max(m, 4096) / bs) * bs;
  }
}

/** Whether vt_engine_load would accept p, by the documented rules. */
function loads(p: NativeLoadParams, available: number): boolean {
  const n = native(p, available);
  return n.kvCacheTokens >= n.maxContext && HOST_WEIGHTS + WORKSPACE + n.kvCacheBytes <= available;
}

function merged(p: NativeLoadParams, o: Record<string, number | undefined> | undefined): NativeLoadParams {
  return { ...p, ...Object.fromEntries(Object.entries(o ?? {}).filter(([, v]) => v !== undefined)) };
}

describe('toMemoryEstimate', () => {
  it('splits the bytes by tier on the CPU: the KV pool and workspaces are host heap, the weights page cache', () => {
    const p = params({ maxContext: 2048 });
    const est = toMemoryEstimate(native(p, 20 * GiB), p);
    expect(est).toStrictEqual({
      device: 'cpu',
      maxContext: 2048,
      weights: { totalBytes: 1_192_099_840, deviceBytes: 0, hostBytes: HOST_WEIGHTS, mappedBytes: 1_192_099_840, skippedBytes: 0 },
      kvCache: { bytes: 4096 * PER_TOKEN, stateSlotBytes: 0, tokens: 4096, bytesPerToken: PER_TOKEN, initialBytes: 4096 * PER_TOKEN, initialTokens: 4096, stateSlotInitialBytes: 0 },
      workspaceBytes: WORKSPACE,
      pinnedHostBytes: 0,
      totals: { hostHeapBytes: HOST_WEIGHTS + 4096 * PER_TOKEN + WORKSPACE, pageCacheBytes: 1_192_099_840, deviceBytes: 0 },
      hostAvailableBytes: 20 * GiB,
      fits: true,
    });
  });

  it('puts the KV pool and workspaces on the device when the weights are there (the CUDA backend)', () => {
    const p = params();
    // A GPU's pool: a ceiling of 400k tokens (what was free), of which the load maps 8192 (8 chunks of 1024).
    const n = {
      ...native(p, 20 * GiB),
      weightDeviceBytes: 1_192_099_840,
      weightMappedBytes: 0,
      kvCacheBytes: 400_000 * PER_TOKEN,
      kvCacheTokens: 400_000,
      kvCacheInitialBytes: 8192 * PER_TOKEN,
      kvCacheInitialTokens: 8192,
    };
    const est = toMemoryEstimate(n, p);
    expect(est.device).toBe('cuda');
    expect(est.kvCache).toStrictEqual({
      bytes: 400_000 * PER_TOKEN,
      stateSlotBytes: 0,
      tokens: 400_000,
      bytesPerToken: PER_TOKEN,
      initialBytes: 8192 * PER_TOKEN,
      initialTokens: 8192,
      stateSlotInitialBytes: 0,
    });
    // What the load takes: the pool's initial part, not its ceiling.
    expect(est.totals).toStrictEqual({
      hostHeapBytes: HOST_WEIGHTS,
      pageCacheBytes: 0,
      deviceBytes: 1_192_099_840 + 8192 * PER_TOKEN + WORKSPACE,
    });
    expect(est.fits).toBe(true);
    // its page-locked staging is host memory
    const pinned = toMemoryEstimate({ ...n, hostPinnedBytes: 5_767_168 }, p);
    expect(pinned.pinnedHostBytes).toBe(5_767_168);
    expect(pinned.totals.hostHeapBytes).toBe(HOST_WEIGHTS + 5_767_168);
  });

  it('fits when MemAvailable is unknown, and says so with null', () => {
    const p = params();
    const est = toMemoryEstimate(native(p, -1), p);
    expect(est.hostAvailableBytes).toBeNull();
    expect(est.fits).toBe(true);
  });

  const cases: Array<[string, Partial<NativeLoadParams>, number, RegExp, string[]]> = [
    ['a pool too small for maxContext', { maxContext: 4096, kvCacheBytes: 1000 * PER_TOKEN }, 20 * GiB, /raise kvCacheBytes to at least \d+.*or lower maxContext to 992/, ['kvCacheBytes']],
    ['a pool too small for maxContext, below one block', { maxContext: 64, kvCacheBytes: 100 }, 20 * GiB, /holds 0 tokens.*raise kvCacheBytes/, ['kvCacheBytes']],
    ['a too-small pool whose right size does not fit either', { maxContext: 40_960, kvCacheBytes: 1000 * PER_TOKEN }, 4 * GiB, /set kvCacheBytes to \d+ .* and maxContext to \d+ or less/, ['kvCacheBytes', 'maxContext']],
    ['an explicit pool larger than memory', { maxContext: 2048, kvCacheBytes: 40 * GiB }, 8 * GiB, /needs 40\.\d+ GiB.*but 8\.00 GiB is available: set kvCacheBytes to \d+/, ['kvCacheBytes']],
    ['a default pool for a long maxContext', { maxContext: 40_960 }, 6 * GiB, /lower maxContext to \d+ or less/, ['maxContext']],
    ['a default pool whose 4096-token floor does not fit', { maxContext: 8192 }, 0.75 * GiB, /set kvCacheBytes to \d+ .* and maxContext to \d+ or less/, ['kvCacheBytes', 'maxContext']],
  ];
  for (const [label, p0, available, message, names] of cases) {
    it(`does not fit with ${label}, and suggests options that do`, () => {
      const p = params(p0);
      expect(loads(p, available)).toBe(false);
      const est = toMemoryEstimate(native(p, available), p);
      expect(est.fits).toBe(false);
      expect(est.suggestion).toMatch(message);
      expect(Object.keys(est.suggestedOptions ?? {}).sort()).toStrictEqual([...names].sort());
      const fixed = merged(p, est.suggestedOptions);
      expect(loads(fixed, available)).toBe(true);
      // ...with headroom: the suggestion leaves at least 10% of MemAvailable free.
      const n = native(fixed, available);
      expect(HOST_WEIGHTS + WORKSPACE + n.kvCacheBytes).toBeLessThanOrEqual(0.9 * available);
      expect(toMemoryEstimate(n, fixed).fits).toBe(true);
    });
  }

  it('names maxBatchTokens and maxSeqs when the workspaces alone leave no room', () => {
    const p = params({ maxContext: 1024 });
    const est = toMemoryEstimate(native(p, 64 * 2 ** 20), p);
    expect(est.fits).toBe(false);
    expect(est.suggestion).toMatch(/lower maxBatchTokens or maxSeqs/);
    expect(est.suggestedOptions).toBeUndefined();
  });
});

describe('estimateMemory', () => {
  function addon(answer: (p: NativeLoadParams) => Promise<NativeEstimate>): NativeAddon {
    return { estimate: (_dir: string, p: NativeLoadParams) => answer(p) } as unknown as NativeAddon;
  }
  const oom = Object.assign(new Error('kvCacheBytes 100 holds 0 tokens'), { code: 'ERR_OUT_OF_MEMORY' });

  it('answers a pool too small for maxContext with fits: false, sizing the pool as the native plan would', async () => {
    const p = params({ maxContext: 1024, kvCacheBytes: 500 * PER_TOKEN + 7 });
    const est = await estimateMemory(addon(async (q) => (q.kvCacheBytes === 0 ? native(q, 20 * GiB) : Promise.reject(oom))), '/m', p);
    // (the asked pool is the whole of a CPU pool: its initial part too)
    expect(est.kvCache).toStrictEqual({
      tokens: 496,
      bytes: 496 * PER_TOKEN,
      stateSlotBytes: 0,
      bytesPerToken: PER_TOKEN,
      initialBytes: 496 * PER_TOKEN,
      initialTokens: 496,
      stateSlotInitialBytes: 0,
    });
    expect(est.fits).toBe(false);
    expect(est.suggestedOptions).toStrictEqual({ kvCacheBytes: 1024 * PER_TOKEN });
  });

  it("keeps a GPU's state slots apart when it resizes a too-small pool: their ceiling in bytes, their first chunk in the initial bytes", async () => {
    const p = params({ device: 'cuda', maxContext: 1024, kvCacheBytes: 500 * PER_TOKEN + 7 });
    // A hybrid model on a GPU: 256 slots of 20 MiB as its ceiling, the load maps a chunk of 4 of them.
    const slots = 256 * 20 * 2 ** 20, firstChunk = 4 * 20 * 2 ** 20;
    const gpu = (q: NativeLoadParams): NativeEstimate => ({
      ...native(q, 20 * GiB),
      weightDeviceBytes: 1_192_099_840,
      weightMappedBytes: 0,
      kvCacheBytes: 400_000 * PER_TOKEN + slots,
      kvCacheTokens: 400_000,
      kvCacheInitialBytes: 8192 * PER_TOKEN + firstChunk,
      kvCacheInitialTokens: 8192,
      stateSlotBytes: slots,
      stateSlotInitialBytes: firstChunk,
    });
    const est = await estimateMemory(addon(async (q) => (q.kvCacheBytes === 0 ? gpu(q) : Promise.reject(oom))), '/m', p);
    expect(est.kvCache).toStrictEqual({
      tokens: 496,
      bytes: 496 * PER_TOKEN + slots,
      stateSlotBytes: slots,
      bytesPerToken: PER_TOKEN,
      initialBytes: 496 * PER_TOKEN + firstChunk,
      initialTokens: 496,
      stateSlotInitialBytes: firstChunk,
    });
    expect(est.totals.deviceBytes).toBe(1_192_099_840 + 496 * PER_TOKEN + firstChunk + WORKSPACE);
  });

  it('turns other native failures into EngineErrors', async () => {
    const bad = Object.assign(new Error('bad header'), { code: 'ERR_BAD_CHECKPOINT' });
    await expect(estimateMemory(addon(() => Promise.reject(bad)), '/m', params())).rejects.toBeInstanceOf(BadCheckpointError);
    // ERR_OUT_OF_MEMORY with the default pool is not a too-small pool: it goes through as it is.
    await expect(estimateMemory(addon(() => Promise.reject(oom)), '/m', params())).rejects.toBeInstanceOf(OutOfMemoryError);
    // Nor is one where the asked pool would hold maxContext (a mapping that failed, say).
    const big = params({ maxContext: 1024, kvCacheBytes: 4096 * PER_TOKEN });
    const mapFailed = addon(async (q) => (q.kvCacheBytes === 0 ? native(q, 20 * GiB) : Promise.reject(oom)));
    await expect(estimateMemory(mapFailed, '/m', big)).rejects.toThrow(/holds 0 tokens/);
  });
});

import { describe, expect, it } from 'vitest';
import { Engine } from '../../lib/engine/engine.js';
import { validateLoadOptions } from '../../lib/engine/load-options.js';
import { AbortError, InvalidOptionError } from '../../lib/errors.js';

/** vt_cuda_graphs with every field at the engine's default: enabled -1 (on), sizes 0 / empty, no dedup. */
const GRAPHS_DEFAULT = { enabled: -1, maxBatch: 0, buckets: [], dedup: false, firstUse: false };

function rejection(options: unknown): InvalidOptionError {
  try {
    validateLoadOptions(options);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error(`validateLoadOptions accepted ${JSON.stringify(options)}`);
}

describe('validateLoadOptions', () => {
  it('maps absent options to the native defaults (0 = engine default)', () => {
    const defaults = {
      device: 'auto', threads: 0, maxContext: 0, maxSeqs: 0, maxBatchTokens: 0, kvBlockSize: 0, kvCacheBytes: 0,
      gpuMemoryUtilization: 0, dtype: 'auto', cudaGraphs: GRAPHS_DEFAULT, prefixCaching: undefined,
    };
    expect(validateLoadOptions(undefined)).toStrictEqual(defaults);
    expect(validateLoadOptions({})).toStrictEqual(defaults);
    expect(validateLoadOptions({ maxContext: undefined })).toStrictEqual(defaults);
  });

  it('maps every option to its native field, leaving callbacks out', () => {
    const controller = new AbortController();
    expect(
      validateLoadOptions({
        device: 'cuda',
        threads: 8,
        maxContext: 4096,
        maxSeqs: 16,
        maxBatchTokens: 1024,
        kvBlockSize: 32,
        kvCacheBytes: 2 ** 33,
        activationDtype: 'bfloat16',
        cudaGraphs: { enabled: true, maxBatch: 12, buckets: [1, 4, 12], dedup: true, capture: 'first-use' },
        prefixCaching: false,
        onProgress: () => {},
        signal: controller.signal,
      }),
    ).toStrictEqual({
      device: 'cuda',
      threads: 8,
      maxContext: 4096,
      maxSeqs: 16,
      maxBatchTokens: 1024,
      kvBlockSize: 32,
      kvCacheBytes: 2 ** 33,
      gpuMemoryUtilization: 0,
      dtype: 'bfloat16',
      cudaGraphs: { enabled: 1, maxBatch: 12, buckets: [1, 4, 12], dedup: true, firstUse: true },
      prefixCaching: false,
    });
    expect(validateLoadOptions({ prefixCaching: true }).prefixCaching).toBe(true);
    expect(validateLoadOptions({ gpuMemoryUtilization: 0.85 }).gpuMemoryUtilization).toBe(0.85);
    expect(validateLoadOptions({ gpuMemoryUtilization: 1 }).gpuMemoryUtilization).toBe(1);
    expect(() => validateLoadOptions({ activationDtype: 'float16' })).toThrow(/Option "activationDtype" must be one of/);
    // The old name is refused with the new one, so that nobody sets it believing it converts the weights.
    expect(() => validateLoadOptions({ dtype: 'bfloat16' })).toThrow(/"dtype" is now "activationDtype".*weights keep the checkpoint's format/);
    expect(validateLoadOptions({ device: 'cpu' }).device).toBe('cpu');
  });

  it.each([
    ['device', 'gpu', /"device".*"auto", "cpu", "cuda".*"gpu"/],
    ['device', 1, /"device"/],
    ['threads', 0, /"threads".*1 to 1024.*got 0/],
    ['threads', 2.5, /"threads".*got 2\.5/],
    ['threads', -1, /"threads".*got -1/],
    ['threads', '4', /"threads".*got "4"/],
    ['maxContext', Number.NaN, /"maxContext".*got NaN/],
    ['maxContext', -8, /"maxContext".*got -8/],
    ['maxContext', 2 ** 31, /"maxContext".*2147483647/],
    ['maxSeqs', 1.5, /"maxSeqs"/],
    ['maxBatchTokens', Infinity, /"maxBatchTokens".*Infinity/],
    ['kvBlockSize', 0, /"kvBlockSize"/],
    ['kvCacheBytes', -1, /"kvCacheBytes"/],
    ['kvCacheBytes', 1e300, /"kvCacheBytes"/],
    ['gpuMemoryUtilization', 0, /"gpuMemoryUtilization".*\(0, 1\].*got 0/],
    ['gpuMemoryUtilization', 1.5, /"gpuMemoryUtilization".*got 1\.5/],
    ['gpuMemoryUtilization', Number.NaN, /"gpuMemoryUtilization".*got NaN/],
    ['gpuMemoryUtilization', '0.5', /"gpuMemoryUtilization".*got "0\.5"/],
    ['prefixCaching', 1, /"prefixCaching".*got 1/],
    ['prefixCaching', 'off', /"prefixCaching".*got "off"/],
    ['prefixCaching', null, /"prefixCaching"/],
    ['onProgress', 'log', /"onProgress".*function/],
    ['signal', { aborted: false }, /"signal".*AbortSignal/],
    ['signal', null, /"signal"/],
  ])('rejects %s = %o', (name, value, message) => {
    const err = rejection({ [name]: value });
    expect(err.code).toBe('ERR_INVALID_OPTION');
    expect(err.message).toMatch(message);
  });

  it('refuses kvCacheBytes and gpuMemoryUtilization together: each one sizes the KV cache', () => {
    const err = rejection({ kvCacheBytes: 2 ** 30, gpuMemoryUtilization: 0.5 });
    expect(err.code).toBe('ERR_INVALID_OPTION');
    expect(err.message).toMatch(/"kvCacheBytes" or "gpuMemoryUtilization", not both/);
  });

  it('rejects unknown keys, naming them and listing the known ones', () => {
    const err = rejection({ maxContxt: 4096 });
    expect(err.message).toMatch(/"maxContxt"/);
    expect(err.message).toMatch(/maxContext/);
  });

  it('rejects options that are not an object', () => {
    for (const options of [null, 5, 'cpu', [1]]) expect(rejection(options).message).toMatch(/must be an object/);
  });
});

describe('validateLoadOptions: cudaGraphs', () => {
  const graphs = (cudaGraphs: unknown, more: Record<string, unknown> = {}) => validateLoadOptions({ cudaGraphs, ...more }).cudaGraphs;

  it('takes true and {} as the defaults, false as off', () => {
    expect(graphs(undefined)).toStrictEqual(GRAPHS_DEFAULT);
    expect(graphs(true)).toStrictEqual(GRAPHS_DEFAULT);
    expect(graphs({})).toStrictEqual(GRAPHS_DEFAULT);
    expect(graphs({ enabled: undefined, buckets: undefined })).toStrictEqual(GRAPHS_DEFAULT);
    expect(graphs(false)).toStrictEqual({ ...GRAPHS_DEFAULT, enabled: 0 });
    expect(graphs({ enabled: false })).toStrictEqual({ ...GRAPHS_DEFAULT, enabled: 0 });
    expect(graphs({ enabled: true })).toStrictEqual({ ...GRAPHS_DEFAULT, enabled: 1 });
  });

  it('passes each field through', () => {
    expect(graphs({ maxBatch: 1 })).toStrictEqual({ ...GRAPHS_DEFAULT, maxBatch: 1 });
    expect(graphs({ maxBatch: 4096 })).toStrictEqual({ ...GRAPHS_DEFAULT, maxBatch: 4096 }); // above maxSeqs: capped natively
    expect(graphs({ dedup: true })).toStrictEqual({ ...GRAPHS_DEFAULT, dedup: true });
    expect(graphs({ dedup: false, enabled: false })).toStrictEqual({ ...GRAPHS_DEFAULT, enabled: 0 });
    expect(graphs({ capture: 'first-use' })).toStrictEqual({ ...GRAPHS_DEFAULT, firstUse: true });
    expect(graphs({ capture: 'load' })).toStrictEqual(GRAPHS_DEFAULT);
    expect(graphs({ buckets: [64] })).toStrictEqual({ ...GRAPHS_DEFAULT, buckets: [64] });
    expect(graphs({ buckets: [256] })).toStrictEqual({ ...GRAPHS_DEFAULT, buckets: [256] }); // the GPU's default maxSeqs
    expect(graphs({ buckets: [3, 200], maxBatch: 200 }, { maxSeqs: 200 })).toStrictEqual({ ...GRAPHS_DEFAULT, buckets: [3, 200], maxBatch: 200 });
    expect(graphs({ buckets: [1, 2], maxBatch: 8 })).toStrictEqual({ ...GRAPHS_DEFAULT, buckets: [1, 2], maxBatch: 8 });
    const thirtyTwo = Array.from({ length: 32 }, (_, i) => 2 * i + 1);
    expect(graphs({ buckets: thirtyTwo })).toStrictEqual({ ...GRAPHS_DEFAULT, buckets: thirtyTwo });
  });

  it('copies the buckets, so a later change of the caller\'s array is not seen', () => {
    const buckets = [1, 8];
    const out = graphs({ buckets });
    buckets.push(16);
    expect(out.buckets).toStrictEqual([1, 8]);
  });

  it('accepts random valid bucket lists and maps them unchanged', () => {
    let seed = 12345;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let trial = 0; trial < 200; trial++) {
      const maxSeqs = 1 + next(300);
      const picked = new Set<number>();
      const count = 1 + next(Math.min(32, maxSeqs));
      while (picked.size < count) picked.add(1 + next(maxSeqs));
      const buckets = [...picked].sort((a, b) => a - b);
      const maxBatch = trial % 2 ? undefined : buckets[buckets.length - 1] + next(10);
      expect(graphs({ buckets, maxBatch }, { maxSeqs })).toStrictEqual({ ...GRAPHS_DEFAULT, buckets, maxBatch: maxBatch ?? 0 });
    }
  });

  it.each<[string, unknown, Record<string, unknown>, RegExp]>([
    ['null', null, {}, /"cudaGraphs" must be a boolean or an object.*got null/],
    ['a number', 1, {}, /"cudaGraphs" must be a boolean or an object.*got 1/],
    ['a string', 'off', {}, /"cudaGraphs".*got "off"/],
    ['an array', [8], {}, /"cudaGraphs".*got \[8\]/],
    ['an unknown key', { maxbatch: 8 }, {}, /Unknown cudaGraphs option "maxbatch".*enabled, maxBatch, buckets, dedup, capture/],
    ['capture misspelled', { capture: 'firstUse' }, {}, /"cudaGraphs\.capture" must be 'load' or 'first-use', got "firstUse"/],
    ['capture as a boolean', { capture: true }, {}, /"cudaGraphs\.capture" must be 'load' or 'first-use', got true/],
    ['enabled as a number', { enabled: 1 }, {}, /"cudaGraphs\.enabled" must be a boolean, got 1/],
    ['enabled as a string', { enabled: 'yes' }, {}, /"cudaGraphs\.enabled".*"yes"/],
    ['dedup as a number', { dedup: 0 }, {}, /"cudaGraphs\.dedup" must be a boolean, got 0/],
    ['maxBatch 0', { maxBatch: 0 }, {}, /"cudaGraphs\.maxBatch" must be an integer from 1 to 4096, got 0/],
    ['maxBatch 4097', { maxBatch: 4097 }, {}, /"cudaGraphs\.maxBatch".*got 4097/],
    ['maxBatch 2.5', { maxBatch: 2.5 }, {}, /"cudaGraphs\.maxBatch".*got 2\.5/],
    ['maxBatch NaN', { maxBatch: Number.NaN }, {}, /"cudaGraphs\.maxBatch".*got NaN/],
    ['maxBatch as a string', { maxBatch: '8' }, {}, /"cudaGraphs\.maxBatch".*got "8"/],
    ['buckets not an array', { buckets: 8 }, {}, /"cudaGraphs\.buckets" must be an array of 1 to 32 batch sizes, got 8/],
    ['empty buckets', { buckets: [] }, {}, /"cudaGraphs\.buckets" must be an array of 1 to 32.*got \[\]/],
    ['33 buckets', { buckets: Array.from({ length: 33 }, (_, i) => i + 1) }, {}, /"cudaGraphs\.buckets".*an array of 33 items/],
    ['a zero bucket', { buckets: [0, 4] }, {}, /"cudaGraphs\.buckets" must hold integers from 1 to 256, the default maxSeqs on the GPU; cudaGraphs\.buckets\[0\] is 0/],
    ['a bucket above the default maxSeqs', { buckets: [4, 257] }, {}, /from 1 to 256.*buckets\[1\] is 257/],
    ['a bucket above maxSeqs', { buckets: [4, 9] }, { maxSeqs: 8 }, /from 1 to 8, maxSeqs; cudaGraphs\.buckets\[1\] is 9/],
    ['a fractional bucket', { buckets: [1.5] }, {}, /buckets\[0\] is 1\.5/],
    ['a string bucket', { buckets: [1, '2'] }, {}, /buckets\[1\] is "2"/],
    ['a hole', { buckets: [1, undefined, 4] }, {}, /buckets\[1\] is undefined/],
    ['repeated buckets', { buckets: [4, 4] }, {}, /"cudaGraphs\.buckets" must be strictly ascending; cudaGraphs\.buckets\[1\] is 4, after 4/],
    ['descending buckets', { buckets: [1, 16, 8] }, {}, /strictly ascending.*buckets\[2\] is 8, after 16/],
    ['maxBatch below the largest bucket', { buckets: [4, 16], maxBatch: 8 }, {}, /"cudaGraphs\.maxBatch" must be at least the largest of cudaGraphs\.buckets \(16\), got 8/],
    ['bad buckets even when off', { enabled: false, buckets: [2, 1] }, {}, /strictly ascending/],
  ])('rejects %s', (_what, cudaGraphs, more, message) => {
    const err = rejection({ cudaGraphs, ...more });
    expect(err.code).toBe('ERR_INVALID_OPTION');
    expect(err.message).toMatch(message);
  });

  it('checks maxSeqs itself before it bounds the buckets', () => {
    expect(rejection({ maxSeqs: 0, cudaGraphs: { buckets: [1] } }).message).toMatch(/"maxSeqs"/);
  });
});

describe('Engine.load before the native addon is touched', () => {
  it('rejects bad options with InvalidOptionError', async () => {
    await expect(Engine.load('/models/x', { maxContext: -1 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(Engine.load('/models/x', { thread: 4 } as never)).rejects.toThrow(/"thread"/);
    await expect(Engine.load('/models/x', { cudaGraphs: { buckets: [2, 1] } })).rejects.toBeInstanceOf(InvalidOptionError);
  });

  it('rejects an empty or non-string path with InvalidOptionError', async () => {
    await expect(Engine.load('')).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(Engine.load(42 as never)).rejects.toBeInstanceOf(InvalidOptionError);
  });

  it('rejects with AbortError when the signal is already aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('user gave up');
    controller.abort(reason);
    const err = await Engine.load('/models/x', { signal: controller.signal }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AbortError);
    expect((err as AbortError).code).toBe('ERR_ABORTED');
    expect((err as AbortError).cause).toBe(reason);
  });
});

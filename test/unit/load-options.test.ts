import { describe, expect, it } from 'vitest';
import { Engine } from '../../lib/engine/engine.js';
import { validateLoadOptions } from '../../lib/engine/load-options.js';
import { AbortError, InvalidOptionError } from '../../lib/errors.js';

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
      device: 'auto', threads: 0, maxContext: 0, maxSeqs: 0, maxBatchTokens: 0, kvBlockSize: 0, kvCacheBytes: 0, dtype: 'auto',
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
        dtype: 'bfloat16',
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
      dtype: 'bfloat16',
    });
    expect(() => validateLoadOptions({ dtype: 'float16' })).toThrow(/dtype/);
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
    ['onProgress', 'log', /"onProgress".*function/],
    ['signal', { aborted: false }, /"signal".*AbortSignal/],
    ['signal', null, /"signal"/],
  ])('rejects %s = %o', (name, value, message) => {
    const err = rejection({ [name]: value });
    expect(err.code).toBe('ERR_INVALID_OPTION');
    expect(err.message).toMatch(message);
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

describe('Engine.load before the native addon is touched', () => {
  it('rejects bad options with InvalidOptionError', async () => {
    await expect(Engine.load('/models/x', { maxContext: -1 })).rejects.toBeInstanceOf(InvalidOptionError);
    await expect(Engine.load('/models/x', { thread: 4 } as never)).rejects.toThrow(/"thread"/);
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

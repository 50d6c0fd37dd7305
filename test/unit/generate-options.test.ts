import { describe, expect, it } from 'vitest';
import { ContextOverflowError, InvalidOptionError } from '../../lib/errors.js';
import { validateGenerateInput, validateGenerateOptions, validateHighWaterMark } from '../../lib/generation/options.js';

const DEFAULTS = { maxTokens: 256, temperature: 0, topK: 0, topP: 1, minP: 0, logprobs: 0 };

function rejection(run: () => unknown): InvalidOptionError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error('expected an InvalidOptionError');
}

describe('validateGenerateOptions', () => {
  it('fills the defaults, with seed and stopTokenIds absent (engine draws a seed, model eos ids stop)', () => {
    expect(validateGenerateOptions(undefined)).toStrictEqual(DEFAULTS);
    expect(validateGenerateOptions({})).toStrictEqual(DEFAULTS);
    expect(validateGenerateOptions({ seed: undefined, stopTokenIds: undefined })).toStrictEqual(DEFAULTS);
  });

  it('maps every option to its native field', () => {
    const signal = new AbortController().signal;
    expect(
      validateGenerateOptions({
        maxTokens: 8,
        temperature: 0.7,
        topK: 40,
        topP: 0.95,
        minP: 0.05,
        seed: 2 ** 53 - 1,
        logprobs: 20,
        stopTokenIds: [2, 7],
        signal,
      }),
    ).toStrictEqual({ maxTokens: 8, temperature: 0.7, topK: 40, topP: 0.95, minP: 0.05, seed: 2 ** 53 - 1, logprobs: 20, stopTokenIds: [2, 7] });
  });

  it('keeps edge values that are allowed', () => {
    expect(validateGenerateOptions({ topP: 1, minP: 0, seed: 0, logprobs: 0, topK: 0, maxTokens: 1 })).toStrictEqual({
      ...DEFAULTS,
      maxTokens: 1,
      seed: 0,
    });
    expect(validateGenerateOptions({ minP: 1, temperature: 100 })).toMatchObject({ minP: 1, temperature: 100 });
  });

  it('passes [] through: stopping on ids turned off', () => {
    expect(validateGenerateOptions({ stopTokenIds: [] }).stopTokenIds).toStrictEqual([]);
  });

  it('copies stopTokenIds so later changes by the caller do not leak in', () => {
    const stop = [1];
    const params = validateGenerateOptions({ stopTokenIds: stop });
    stop.push(2);
    expect(params.stopTokenIds).toStrictEqual([1]);
  });

  it.each([
    ['maxTokens', 0],
    ['maxTokens', 1.5],
    ['maxTokens', Number.NaN],
    ['maxTokens', '16'],
    ['maxTokens', 2 ** 31],
    ['temperature', -0.1],
    ['temperature', Number.NaN],
    ['temperature', Infinity],
    ['temperature', '0.5'],
    ['topK', -1],
    ['topK', 2.5],
    ['topP', 0],
    ['topP', 1.01],
    ['topP', -0.5],
    ['topP', Number.NaN],
    ['minP', -0.01],
    ['minP', 1.5],
    ['seed', -1],
    ['seed', 1.5],
    ['seed', 2 ** 53],
    ['seed', 123n],
    ['logprobs', 21],
    ['logprobs', -1],
    ['logprobs', 2.5],
    ['logprobs', true],
    ['stopTokenIds', 2],
    ['stopTokenIds', [1, -2]],
    ['stopTokenIds', [1.5]],
    ['stopTokenIds', ['2']],
    ['stopTokenIds', Array.from({ length: 17 }, (_, i) => i)],
    ['signal', 'abort'],
  ])('rejects %s = %o, naming the option', (name, value) => {
    const err = rejection(() => validateGenerateOptions({ [name]: value }));
    expect(err.code).toBe('ERR_INVALID_OPTION');
    expect(err.message).toContain(`"${name}"`);
  });

  it('states the allowed range and the value in the message', () => {
    expect(rejection(() => validateGenerateOptions({ topP: 0 })).message).toMatch(/\(0, 1\].*got 0/);
    expect(rejection(() => validateGenerateOptions({ logprobs: 21 })).message).toMatch(/0 to 20.*got 21/);
    expect(rejection(() => validateGenerateOptions({ temperature: -1 })).message).toMatch(/0 or more.*got -1/);
  });

  it('rejects unknown keys', () => {
    expect(rejection(() => validateGenerateOptions({ max_tokens: 5 })).message).toMatch(/"max_tokens".*maxTokens/);
  });

  it('rejects options that are not an object', () => {
    for (const options of [null, 3, [1]]) rejection(() => validateGenerateOptions(options));
  });

  it('checks stop ids against the vocabulary when it is known', () => {
    expect(validateGenerateOptions({ stopTokenIds: [99] }, { vocabSize: 100 }).stopTokenIds).toStrictEqual([99]);
    expect(rejection(() => validateGenerateOptions({ stopTokenIds: [100] }, { vocabSize: 100 })).message).toMatch(/0 to 99/);
  });
});

describe('validateHighWaterMark', () => {
  it('defaults to 256 tokens and takes any integer from 1 to 2^31 - 1; it is not a native field', () => {
    expect(validateHighWaterMark(undefined)).toBe(256);
    expect(validateHighWaterMark({})).toBe(256);
    expect(validateHighWaterMark({ highWaterMark: 1 })).toBe(1);
    expect(validateHighWaterMark({ highWaterMark: 2 ** 31 - 1 })).toBe(2 ** 31 - 1);
    expect(validateGenerateOptions({ highWaterMark: 16 })).toStrictEqual(DEFAULTS);
  });

  it('rejects anything else, from generate()\'s own validator too, naming the option and the value', () => {
    for (const highWaterMark of [0, -1, 1.5, '8', Number.NaN, Number.POSITIVE_INFINITY, 2 ** 31, null]) {
      const err = rejection(() => validateHighWaterMark({ highWaterMark }));
      expect(err.code).toBe('ERR_INVALID_OPTION');
      expect(err.message).toMatch(/"highWaterMark" must be an integer from 1 to 2147483647, got/);
      rejection(() => validateGenerateOptions({ highWaterMark }));
    }
  });
});

describe('validateGenerateInput', () => {
  it('returns the prompt as an Int32Array', () => {
    const tokens = validateGenerateInput({ tokens: [1, 2, 0, 31999] });
    expect(tokens).toBeInstanceOf(Int32Array);
    expect([...tokens]).toStrictEqual([1, 2, 0, 31999]);
  });

  it.each([
    ['an empty prompt', { tokens: [] }],
    ['a negative id', { tokens: [1, -1] }],
    ['a fractional id', { tokens: [1.5] }],
    ['a NaN id', { tokens: [Number.NaN] }],
    ['a string id', { tokens: ['1'] }],
    ['an id beyond int32', { tokens: [2 ** 31] }],
    ['tokens that are not an array', { tokens: '1 2 3' }],
  ])('rejects %s, naming "tokens"', (_what, input) => {
    expect(rejection(() => validateGenerateInput(input)).message).toContain('"tokens"');
  });

  it('rejects inputs without tokens, with unknown keys, or not objects', () => {
    expect(rejection(() => validateGenerateInput({ prompt: 'hi' })).message).toMatch(/tokens/);
    expect(rejection(() => validateGenerateInput({ tokens: [1], extra: 1 })).message).toMatch(/"extra"/);
    for (const input of [null, undefined, [1, 2], 'hi']) rejection(() => validateGenerateInput(input));
  });

  it('rejects an id outside the known vocabulary with InvalidOptionError', () => {
    const err = rejection(() => validateGenerateInput({ tokens: [5, 100] }, { vocabSize: 100, maxContext: 64 }));
    expect(err.message).toMatch(/tokens\[1\] is 100.*0 to 99/);
    expect([...validateGenerateInput({ tokens: [99] }, { vocabSize: 100 })]).toStrictEqual([99]);
  });

  it('throws ContextOverflowError when the prompt leaves no room for a new token', () => {
    const limits = { maxContext: 4, vocabSize: 100 };
    expect([...validateGenerateInput({ tokens: [1, 2, 3] }, limits)]).toStrictEqual([1, 2, 3]);
    const run = () => validateGenerateInput({ tokens: [1, 2, 3, 4] }, limits);
    expect(run).toThrow(ContextOverflowError);
    expect(run).toThrow(/4 tokens.*context of 4 tokens.*maxContext/);
  });
});

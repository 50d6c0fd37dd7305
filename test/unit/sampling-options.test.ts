// The new generate() options: penalties and logit bias mapped onto the native request, text options, input forms.
import { describe, expect, it } from 'vitest';
import { EngineError, InvalidOptionError } from '../../lib/errors.js';
import { inputForm, validateGenerateOptions, validateTextOptions } from '../../lib/generation/options.js';

function rejection(run: () => unknown): EngineError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as EngineError;
  }
  throw new Error('expected a throw');
}

describe('penalties and logit bias', () => {
  it('leave the native request untouched when absent', () => {
    const p = validateGenerateOptions({});
    for (const key of ['repetitionPenalty', 'presencePenalty', 'frequencyPenalty', 'logitBias']) expect(p).not.toHaveProperty(key);
  });

  it('map onto the native fields', () => {
    const p = validateGenerateOptions(
      { repetitionPenalty: 1.3, presencePenalty: -0.5, frequencyPenalty: 0.25, logitBias: { 7: -100, 3: 2.5, 0: 0 } },
      { vocabSize: 10 },
    );
    expect(p).toMatchObject({ repetitionPenalty: 1.3, presencePenalty: -0.5, frequencyPenalty: 0.25 });
    expect(p.logitBias).toEqual([[0, 0], [3, 2.5], [7, -100]]);
    expect(validateGenerateOptions({ logitBias: {} }).logitBias).toEqual([]);
    // -Infinity bans a token outright; it is the one non-finite bias allowed.
    expect(validateGenerateOptions({ logitBias: { 4: Number.NEGATIVE_INFINITY } }).logitBias).toEqual([[4, Number.NEGATIVE_INFINITY]]);
  });

  it.each([
    ['repetitionPenalty', 0],
    ['repetitionPenalty', -1],
    ['repetitionPenalty', Number.NaN],
    ['repetitionPenalty', '1.1'],
    ['presencePenalty', Number.POSITIVE_INFINITY],
    ['presencePenalty', Number.NaN],
    ['frequencyPenalty', Number.NEGATIVE_INFINITY],
    ['frequencyPenalty', null],
  ])('rejects %s = %s, naming it', (name, value) => {
    expect(rejection(() => validateGenerateOptions({ [name]: value })).message).toContain(`"${name}"`);
  });

  it.each([
    ['an id outside the vocabulary', { 10: 1 }, /"10".*0 to 9/],
    ['a negative id', { '-1': 1 }, /"-1"/],
    ['a fractional id', { '1.5': 1 }, /"1.5"/],
    ['a non-numeric key', { abc: 1 }, /"abc"/],
    ['a NaN bias', { 1: Number.NaN }, /token 1.*finite/],
    ['a +Infinity bias', { 1: Number.POSITIVE_INFINITY }, /finite/],
    ['a string bias', { 1: '5' }, /finite/],
  ])('rejects a logitBias with %s', (_what, value, message) => {
    expect(rejection(() => validateGenerateOptions({ logitBias: value }, { vocabSize: 10 })).message).toMatch(message);
  });

  it('rejects a logitBias that is not a plain object', () => {
    for (const value of [null, [[1, 2]], new Map([[1, 2]]), 5]) rejection(() => validateGenerateOptions({ logitBias: value }));
  });
});

describe('text options', () => {
  it('default to no stop strings and skipping special tokens', () => {
    expect(validateTextOptions(undefined)).toEqual({ stop: [], skipSpecialTokens: true });
    expect(validateTextOptions({ stop: ['a', '\n\n'], skipSpecialTokens: false })).toEqual({ stop: ['a', '\n\n'], skipSpecialTokens: false });
  });

  it('reject bad stop strings and flags', () => {
    expect(rejection(() => validateTextOptions({ stop: 'END' })).message).toMatch(/"stop"/);
    expect(rejection(() => validateTextOptions({ stop: [''] })).message).toMatch(/stop\[0\]/);
    expect(rejection(() => validateTextOptions({ stop: ['a', 3] })).message).toMatch(/stop\[1\]/);
    expect(rejection(() => validateTextOptions({ stop: Array(17).fill('x') })).message).toMatch(/at most 16/);
    expect(rejection(() => validateTextOptions({ skipSpecialTokens: 1 })).message).toMatch(/"skipSpecialTokens"/);
  });

  it('are known to generate(), so no unknown-option error', () => {
    expect(() => validateGenerateOptions({ stop: ['x'], skipSpecialTokens: true })).not.toThrow();
  });
});

describe('input forms', () => {
  it('tells tokens, prompt and messages apart', () => {
    expect(inputForm({ tokens: [1] })).toEqual({ form: 'tokens' });
    expect(inputForm({ prompt: '' })).toEqual({ form: 'prompt', prompt: '' });
    const messages = [{ role: 'user', content: 'hi' }];
    expect(inputForm({ messages })).toEqual({ form: 'messages', messages, templateVars: {} });
    expect(inputForm({ messages, templateVars: { enable_thinking: false } })).toMatchObject({ templateVars: { enable_thinking: false } });
  });

  it('rejects malformed inputs, naming what is wrong', () => {
    expect(rejection(() => inputForm({ prompt: 5 })).message).toMatch(/"prompt".*string/);
    expect(rejection(() => inputForm({ prompt: 'a', tokens2: 1 })).message).toMatch(/"tokens2"/);
    expect(rejection(() => inputForm({ messages: [], templateVars: 3 })).message).toMatch(/templateVars/);
    expect(rejection(() => inputForm({ messages: [], templateVars: { add_generation_prompt: false } })).message).toMatch(/always/);
    expect(rejection(() => inputForm({ text: 'hi' })).message).toMatch(/"prompt".*"messages".*"tokens".*"text"/);
    for (const input of [null, undefined, 'hi', [1]]) rejection(() => inputForm(input));
  });
});

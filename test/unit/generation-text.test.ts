// The text side of a Generation, fed with step events as the engine would: chunk texts, the result's text, the
// EOS id left out of the text, stop strings ending the generation, and held-back text flushed at the end.
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { Generation } from '../../lib/generation/generation.js';
import type { GenerationChunk } from '../../lib/generation/result.js';
import { TextOutput } from '../../lib/generation/text-output.js';
import { NativeFinish, type NativeStepEvent } from '../../lib/native/addon.js';
import { loadTokenizer, type TextTokenizer } from '../../lib/tokenizer/tokenizer.js';
import { tokenizerDir } from '../helpers/tokenizers.js';

let tok: TextTokenizer;
let IM_END: number;
beforeAll(async () => {
  tok = (await loadTokenizer(tokenizerDir('qwen3')))!;
  IM_END = tok.tokenId('<|im_end|>')!;
});

function makeGeneration(stop: string[] = [], skipSpecial = true) {
  const requestAbort = vi.fn();
  const now = performance.now();
  const gen = new Generation({
    promptTokens: 3,
    logprobs: false,
    eosTokenIds: [IM_END],
    requestAbort,
    allowTokens: () => {},
    highWaterMark: 256,
    readerPaused: () => {},
    startedAt: now,
    submittedAt: now,
    text: new TextOutput(tok, stop, skipSpecial),
  });
  const chunks: GenerationChunk[] = [];
  gen.on('token', (c) => chunks.push(c));
  return { gen, requestAbort, chunks };
}

const ev = (token: number, finish = NativeFinish.None): NativeStepEvent => ({ id: 1, token, finish });

describe('Generation text', () => {
  it('chunks carry text; an emoji split over tokens comes whole; the EOS adds no text', async () => {
    const { gen, chunks } = makeGeneration();
    const ids = tok.encode('Hi 👨‍👩‍👧 there', false);
    for (const id of ids) gen._push(ev(id));
    gen._push(ev(IM_END, NativeFinish.Eos));
    const result = await gen;
    expect(result.finishReason).toBe('eos');
    expect(result.text).toBe('Hi 👨‍👩‍👧 there');
    expect(result.tokenIds).toEqual([...ids, IM_END]);
    expect(chunks.map((c) => c.text).join('')).toBe(result.text);
    expect(chunks.some((c) => c.text === '')).toBe(true); // held back mid-emoji
    expect(chunks.every((c) => !c.text!.includes('\uFFFD'))).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ tokenIds: [IM_END], text: '' });
  });

  it('a stop id that is not special still stays out of the text', async () => {
    const { gen } = makeGeneration();
    const [a, dot] = tok.encode('a.', false);
    gen._push(ev(a));
    gen._push(ev(dot, NativeFinish.Eos));
    const result = await gen;
    expect(result).toMatchObject({ finishReason: 'stop', text: 'a', tokenIds: [a, dot] });
  });

  it('a stop string spanning tokens ends the generation with finishReason "stop" and asks the engine to drop it', async () => {
    const { gen, requestAbort, chunks } = makeGeneration(['Observation:']);
    const ids = tok.encode('Thought: look it up\nObservation: 42', false);
    for (const id of ids) gen._push(ev(id));
    const result = await gen;
    expect(result.finishReason).toBe('stop');
    expect(result.text).toBe('Thought: look it up\n');
    expect(chunks.map((c) => c.text).join('')).toBe(result.text);
    const upTo = ids.findIndex((_, i) => tok.decode(ids.slice(0, i + 1), true).includes('Observation:'));
    expect(result.tokenIds).toEqual(ids.slice(0, upTo + 1));
    expect(requestAbort).toHaveBeenCalledTimes(1);
    // The abort's own finish event, and any late token, change nothing.
    gen._push(ev(ids[0]));
    gen._push({ id: 1, token: -1, finish: NativeFinish.Abort });
    expect((await gen).tokenIds).toEqual(result.tokenIds);
  });

  it('text held back for a possible stop string comes out when the generation ends otherwise', async () => {
    const { gen, chunks } = makeGeneration(['<END>']);
    const ids = tok.encode('value <EN', false);
    ids.slice(0, -1).forEach((id) => gen._push(ev(id)));
    gen._push(ev(ids.at(-1)!, NativeFinish.Length));
    const result = await gen;
    expect(result).toMatchObject({ finishReason: 'length', text: 'value <EN' });
    expect(chunks.map((c) => c.text).join('')).toBe('value <EN');
  });

  it('on abort, held-back text arrives in a last chunk without ids', async () => {
    const { gen, chunks } = makeGeneration(['<END>']);
    for (const id of tok.encode('x <E', false)) gen._push(ev(id));
    gen.abort();
    gen._push({ id: 1, token: -1, finish: NativeFinish.Abort });
    const result = await gen;
    expect(result).toMatchObject({ finishReason: 'abort', text: 'x <E' });
    expect(chunks.at(-1)!.tokenIds).toEqual([]);
    expect(chunks.map((c) => c.text).join('')).toBe('x <E');
  });

  it('skipSpecialTokens: false keeps special tokens in the text', async () => {
    const { gen } = makeGeneration([], false);
    const ids = tok.encode('a<|im_start|>b', false);
    for (const id of ids) gen._push(ev(id));
    gen._push({ id: 1, token: -1, finish: NativeFinish.Length });
    expect((await gen).text).toBe('a<|im_start|>b');
  });
});

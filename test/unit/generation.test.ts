import { describe, expect, it, vi } from 'vitest';
import { EngineError, InternalError, InvalidOptionError } from '../../lib/errors.js';
import { Generation, type GenerationInit } from '../../lib/generation/generation.js';
import type { GenerationChunk, GenerationResult } from '../../lib/generation/result.js';
import { NativeFinish, type NativeStepEvent } from '../../lib/native/addon.js';

const EOS = 2;

/** A Generation as the engine would create it, with spies in place of the native abort and backpressure calls. */
function makeGeneration(init: Partial<GenerationInit> = {}) {
  const requestAbort = vi.fn();
  const allowTokens = vi.fn();
  const readerPaused = vi.fn();
  const now = performance.now();
  const gen = new Generation({
    promptTokens: 3,
    logprobs: false,
    eosTokenIds: [EOS],
    requestAbort,
    allowTokens,
    highWaterMark: 256,
    readerPaused,
    startedAt: now,
    submittedAt: now,
    ...init,
  });
  return { gen, requestAbort, allowTokens, readerPaused };
}

const token = (id: number, extra: Partial<NativeStepEvent> = {}): NativeStepEvent => ({
  id: 7,
  token: id,
  finish: NativeFinish.None,
  ...extra,
});
const finish = (kind: NativeFinish, extra: Partial<NativeStepEvent> = {}): NativeStepEvent => ({
  id: 7,
  token: -1,
  finish: kind,
  ...extra,
});
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function collect(gen: Generation): Promise<number[]> {
  const ids: number[] = [];
  for await (const chunk of gen) ids.push(...chunk.tokenIds);
  return ids;
}

describe('Generation: one stream, three views', () => {
  it('iterator, promise and events see the same tokens', async () => {
    const { gen } = makeGeneration();
    const events: number[] = [];
    let ended: GenerationResult | undefined;
    gen.on('token', (chunk) => events.push(...chunk.tokenIds));
    gen.on('end', (result) => (ended = result));
    const iterated = collect(gen);

    for (const id of [10, 11, 12]) {
      gen._push(token(id));
      await tick();
    }
    gen._push(token(EOS, { finish: NativeFinish.Eos, promptTokens: 3, completionTokens: 4 }));

    const result = await gen;
    expect(await iterated).toStrictEqual([10, 11, 12, EOS]);
    expect(events).toStrictEqual([10, 11, 12, EOS]);
    expect(result.tokenIds).toStrictEqual([10, 11, 12, EOS]);
    expect(result.finishReason).toBe('eos');
    expect(result.usage).toStrictEqual({ promptTokens: 3, completionTokens: 4 });
    expect(result.logprobs).toBeUndefined();
    expect(ended).toBe(result);
  });

  it('yields one chunk per token event', async () => {
    const { gen } = makeGeneration();
    const chunks: GenerationChunk[] = [];
    gen.on('token', (c) => chunks.push(c));
    gen._push(token(5));
    gen._push(token(6, { finish: NativeFinish.Length }));
    expect(chunks).toStrictEqual([{ tokenIds: [5] }, { tokenIds: [6] }]);
    expect((await gen).finishReason).toBe('length');
  });

  it('buffers chunks produced before iteration starts', async () => {
    const { gen } = makeGeneration();
    gen._push(token(10));
    gen._push(token(11));
    gen._push(token(12, { finish: NativeFinish.Length }));
    await tick();
    expect(await collect(gen)).toStrictEqual([10, 11, 12]);
  });

  it('works with then/catch/finally like a promise', async () => {
    const { gen } = makeGeneration();
    const onFinally = vi.fn();
    const done = gen.finally(onFinally).then((r) => r.tokenIds);
    const caught = gen.catch(() => 'never');
    gen._push(token(1, { finish: NativeFinish.Length }));
    expect(await done).toStrictEqual([1]);
    expect(await caught).toMatchObject({ finishReason: 'length' });
    expect(onFinally).toHaveBeenCalledOnce();
  });

  it('allows one consumer: a second iterator throws an EngineError', () => {
    const { gen } = makeGeneration();
    gen[Symbol.asyncIterator]();
    expect(() => gen[Symbol.asyncIterator]()).toThrow(InvalidOptionError);
  });

  it('ignores events after the end', async () => {
    const { gen } = makeGeneration();
    const onToken = vi.fn();
    gen.on('token', onToken);
    gen._push(token(1, { finish: NativeFinish.Length }));
    gen._push(token(2));
    gen._push(finish(NativeFinish.Error, { message: 'late' }));
    const result = await gen;
    expect(result.tokenIds).toStrictEqual([1]);
    expect(onToken).toHaveBeenCalledTimes(1);
  });
});

describe('Generation: finish reasons and usage', () => {
  it("reports a stop id that is not an EOS id as 'stop'", async () => {
    const { gen } = makeGeneration();
    gen._push(token(9));
    gen._push(token(42, { finish: NativeFinish.Eos }));
    expect((await gen).finishReason).toBe('stop');
  });

  it("reports an EOS finish without a final token as 'eos'", async () => {
    const { gen } = makeGeneration();
    gen._push(finish(NativeFinish.Eos));
    expect((await gen).finishReason).toBe('eos');
  });

  it('falls back to local counts when the finish event carries none', async () => {
    const { gen } = makeGeneration({ promptTokens: 5 });
    gen._push(token(1));
    gen._push(token(2, { finish: NativeFinish.Length }));
    expect((await gen).usage).toStrictEqual({ promptTokens: 5, completionTokens: 2 });
  });

  it('measures timings from the start, submission and token arrivals', async () => {
    const startedAt = performance.now() - 50;
    const { gen } = makeGeneration({ startedAt, submittedAt: startedAt + 10 });
    gen._push(token(1));
    await new Promise((r) => setTimeout(r, 20));
    gen._push(token(2));
    gen._push(token(3, { finish: NativeFinish.Length }));
    const { timings } = await gen;
    expect(timings.queuedMs).toBeCloseTo(10, 5);
    expect(timings.prefillMs).toBeGreaterThanOrEqual(40);
    expect(timings.decodeMs).toBeGreaterThanOrEqual(15);
    expect(timings.totalMs).toBeGreaterThanOrEqual(timings.queuedMs + timings.prefillMs + timings.decodeMs - 1e-6);
    expect(timings.tokensPerSecond).toBeCloseTo(2000 / timings.decodeMs, 5);
  });

  it('reports zero decode speed for a single token', async () => {
    const { gen } = makeGeneration();
    gen._push(token(1, { finish: NativeFinish.Length }));
    const { timings } = await gen;
    expect(timings.decodeMs).toBe(0);
    expect(timings.tokensPerSecond).toBe(0);
  });
});

describe('Generation: logprobs', () => {
  it('maps the native logprob fields into chunks and the result', async () => {
    const { gen } = makeGeneration({ logprobs: true });
    const chunks: GenerationChunk[] = [];
    gen.on('token', (c) => chunks.push(c));
    gen._push(token(10, { logprob: -0.5, topIds: [10, 11], topLogprobs: [-0.5, -1.25] }));
    gen._push(token(11, { logprob: -0.1, topIds: [11], topLogprobs: [-0.1], finish: NativeFinish.Length }));
    const result = await gen;
    const first = { tokenId: 10, logprob: -0.5, top: [{ tokenId: 10, logprob: -0.5 }, { tokenId: 11, logprob: -1.25 }] };
    const second = { tokenId: 11, logprob: -0.1, top: [{ tokenId: 11, logprob: -0.1 }] };
    expect(chunks).toStrictEqual([
      { tokenIds: [10], logprobs: [first] },
      { tokenIds: [11], logprobs: [second] },
    ]);
    expect(result.logprobs).toStrictEqual([first, second]);
  });

  it('has an empty top list when the engine sent none', async () => {
    const { gen } = makeGeneration({ logprobs: true });
    gen._push(token(3, { logprob: -2, finish: NativeFinish.Length }));
    expect((await gen).logprobs).toStrictEqual([{ tokenId: 3, logprob: -2, top: [] }]);
  });
});

describe('Generation: abort', () => {
  it('abort() asks the engine once; the promise resolves with the partial result', async () => {
    const { gen, requestAbort } = makeGeneration();
    const iterated = collect(gen);
    gen._push(token(10));
    gen._push(token(11));
    gen.abort();
    gen.abort();
    expect(requestAbort).toHaveBeenCalledOnce();
    gen._push(finish(NativeFinish.Abort, { promptTokens: 3, completionTokens: 2 }));
    const result = await gen;
    expect(result.finishReason).toBe('abort');
    expect(result.tokenIds).toStrictEqual([10, 11]);
    expect(result.usage).toStrictEqual({ promptTokens: 3, completionTokens: 2 });
    await expect(iterated).resolves.toStrictEqual([10, 11]); // ends normally, no throw
  });

  it('abort() after the end does nothing', async () => {
    const { gen, requestAbort } = makeGeneration();
    gen._push(token(1, { finish: NativeFinish.Length }));
    gen.abort();
    expect(requestAbort).not.toHaveBeenCalled();
    expect((await gen).finishReason).toBe('length');
  });

  it('breaking out of for await aborts the request', async () => {
    const { gen, requestAbort } = makeGeneration();
    gen._push(token(10));
    gen._push(token(11));
    const seen: number[] = [];
    for await (const chunk of gen) {
      seen.push(...chunk.tokenIds);
      break;
    }
    expect(seen).toStrictEqual([10]);
    expect(requestAbort).toHaveBeenCalledOnce();
    gen._push(finish(NativeFinish.Abort));
    const result = await gen;
    expect(result.finishReason).toBe('abort');
    expect(result.tokenIds).toStrictEqual([10, 11]);
  });

  it('a throw inside for await aborts the request too', async () => {
    const { gen, requestAbort } = makeGeneration();
    gen._push(token(10));
    await expect(
      (async () => {
        for await (const _ of gen) throw new Error('consumer failed');
      })(),
    ).rejects.toThrow('consumer failed');
    expect(requestAbort).toHaveBeenCalledOnce();
  });

  it('the signal option aborts, and its listener is removed at the end', async () => {
    const controller = new AbortController();
    const remove = vi.spyOn(controller.signal, 'removeEventListener');
    const { gen, requestAbort } = makeGeneration({ signal: controller.signal });
    gen._push(token(10));
    controller.abort();
    expect(requestAbort).toHaveBeenCalledOnce();
    gen._push(finish(NativeFinish.Abort));
    expect(await gen).toMatchObject({ finishReason: 'abort', tokenIds: [10] });
    expect(remove).toHaveBeenCalledWith('abort', expect.any(Function));
  });

  it('_abandon() (engine disposed) ends it as aborted and wakes a waiting iterator', async () => {
    const { gen } = makeGeneration({ promptTokens: 4 });
    const iterated = collect(gen);
    gen._push(token(10));
    await tick();
    gen._abandon();
    expect(await iterated).toStrictEqual([10]);
    expect(await gen).toMatchObject({ finishReason: 'abort', tokenIds: [10], usage: { promptTokens: 4, completionTokens: 1 } });
  });
});

describe('Generation: engine errors', () => {
  it('rejects the promise, emits error, and throws from the iterator after the earlier chunks', async () => {
    const { gen } = makeGeneration();
    const onError = vi.fn();
    gen.on('error', onError);
    gen._push(token(10));
    gen._push(finish(NativeFinish.Error, { message: 'CUDA launch failed' }));

    const err = await gen.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InternalError);
    expect(err).toBeInstanceOf(EngineError);
    expect((err as InternalError).message).toContain('CUDA launch failed');
    expect(onError).toHaveBeenCalledWith(err);

    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const chunk of gen) seen.push(...chunk.tokenIds);
      })(),
    ).rejects.toBe(err);
    expect(seen).toStrictEqual([10]);
  });

  it('rejects a waiting iterator', async () => {
    const { gen } = makeGeneration();
    const iterated = collect(gen);
    await tick();
    gen._push(finish(NativeFinish.Error, { message: 'bad' }));
    await expect(iterated).rejects.toBeInstanceOf(InternalError);
  });

  it('does not throw without an error listener, and an unobserved failure is no unhandledRejection', async () => {
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    try {
      const { gen } = makeGeneration();
      expect(() => gen._push(finish(NativeFinish.Error, { message: 'bad' }))).not.toThrow();
      await tick();
      await tick();
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off('unhandledRejection', unhandled);
    }
  });

  it('a listener that throws does not stop the generation from settling', async () => {
    const { gen } = makeGeneration();
    const uncaught = vi.fn();
    const original = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', uncaught);
    try {
      gen.on('token', () => {
        throw new Error('listener bug');
      });
      gen._push(token(1, { finish: NativeFinish.Length }));
      expect((await gen).tokenIds).toStrictEqual([1]);
      await tick();
      expect(uncaught).toHaveBeenCalledWith(expect.objectContaining({ message: 'listener bug' }), expect.anything());
    } finally {
      process.removeAllListeners('uncaughtException');
      for (const listener of original) process.on('uncaughtException', listener);
    }
  });
});

describe('Generation: backpressure', () => {
  // The engine side is a spy here: allowTokens(n) is what the request may generate in all; the engine would send no
  // token past it. test/golden/backpressure.test.ts runs the real engine.
  it('only a taken iterator limits the request: awaiting and token listeners never pause it', async () => {
    const { gen, allowTokens, readerPaused } = makeGeneration({ highWaterMark: 4 });
    const seen: number[] = [];
    gen.on('token', (c) => seen.push(...c.tokenIds));
    for (let i = 0; i < 50; ++i) gen._push(token(100 + i));
    gen._push(token(150, { finish: NativeFinish.Length }));
    expect((await gen).tokenIds).toHaveLength(51);
    expect(seen).toHaveLength(51);
    expect(allowTokens).not.toHaveBeenCalled();
    expect(readerPaused).not.toHaveBeenCalled();
  });

  it('the iterator lets the engine run a high-water mark ahead, and more each time all but a quarter is read', async () => {
    const { gen, allowTokens, readerPaused } = makeGeneration({ highWaterMark: 8 });
    const reader = gen[Symbol.asyncIterator]();
    expect(allowTokens.mock.calls).toStrictEqual([[8]]);
    for (let i = 0; i < 8; ++i) gen._push(token(i));
    expect(readerPaused.mock.calls).toStrictEqual([[true]]); // every token allowed has come: it waits on the reader
    const read: number[] = [];
    for (let i = 0; i < 5; ++i) read.push(...((await reader.next()).value as GenerationChunk).tokenIds);
    expect(allowTokens.mock.calls).toStrictEqual([[8]]); // 3 ahead: more than a quarter of 8
    read.push(...((await reader.next()).value as GenerationChunk).tokenIds);
    expect(allowTokens.mock.calls).toStrictEqual([[8], [14]]); // 2 ahead: 6 read + 8
    expect(readerPaused.mock.calls).toStrictEqual([[true], [false]]);
    for (let i = 0; i < 2; ++i) read.push(...((await reader.next()).value as GenerationChunk).tokenIds);
    // A reader that waits takes each chunk as it comes: it is counted as read at once.
    const waiting = reader.next();
    gen._push(token(8));
    read.push(...((await waiting).value as GenerationChunk).tokenIds);
    expect(read).toStrictEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    for (let i = 9; i < 14; ++i) gen._push(token(i));
    expect(readerPaused).toHaveBeenCalledTimes(3); // 14 delivered, 14 allowed
    gen.abort();
    expect(readerPaused.mock.calls.at(-1)).toStrictEqual([false]); // its abort event is due: not paused any more
    gen._push(finish(NativeFinish.Abort));
    const rest: number[] = [];
    for (let r = await reader.next(); !r.done; r = await reader.next()) rest.push(...r.value.tokenIds);
    expect(rest).toStrictEqual([9, 10, 11, 12, 13]); // none lost, none twice
    expect(allowTokens).toHaveBeenCalledTimes(2); // nothing more allowed once it has ended
  });

  it('chunks buffered before the iterator count against it: the engine is held until they are read', () => {
    const { gen, allowTokens, readerPaused } = makeGeneration({ highWaterMark: 4 });
    for (let i = 0; i < 10; ++i) gen._push(token(i));
    gen[Symbol.asyncIterator]();
    expect(allowTokens.mock.calls).toStrictEqual([[4]]);
    expect(readerPaused.mock.calls).toStrictEqual([[true]]);
  });

  // As the engine submits: held to the high-water mark from the first step (native allowedTokens).
  it('held from the start: a loop taken in the same tick keeps that allowance, so nothing is sent until it reads', async () => {
    const { gen, allowTokens } = makeGeneration({ highWaterMark: 8, heldFromStart: true });
    const reader = gen[Symbol.asyncIterator]();
    await Promise.resolve(); // past the microtask that would lift the limit of a generation nobody iterates
    expect(allowTokens).not.toHaveBeenCalled(); // the engine already has 8
    for (let i = 0; i < 8; ++i) gen._push(token(i));
    for (let i = 0; i < 6; ++i) await reader.next();
    expect(allowTokens.mock.calls).toStrictEqual([[14]]);
  });

  it('held from the start: a generation not iterated by the next microtask is let go, and held again by a later loop', async () => {
    const { gen, allowTokens, readerPaused } = makeGeneration({ highWaterMark: 8, heldFromStart: true });
    expect(allowTokens).not.toHaveBeenCalled(); // decided after the code that called generate(), not during it
    await Promise.resolve();
    expect(allowTokens.mock.calls).toStrictEqual([[-1]]); // awaited or followed through events: never paused
    for (let i = 0; i < 20; ++i) gen._push(token(i));
    expect(readerPaused).not.toHaveBeenCalled();
    gen[Symbol.asyncIterator](); // a loop taken later holds it to what it has read, as ever
    expect(allowTokens.mock.calls).toStrictEqual([[-1], [8]]);
    expect(readerPaused.mock.calls).toStrictEqual([[true]]);
  });

  it('held from the start: one that ended before the microtask is not let go (the engine forgot it)', async () => {
    const { gen, allowTokens } = makeGeneration({ highWaterMark: 8, heldFromStart: true });
    gen._push(token(1, { finish: NativeFinish.Length }));
    await gen;
    expect(allowTokens).not.toHaveBeenCalled();
  });

  it('an iterator taken after the end allows nothing', async () => {
    const { gen, allowTokens } = makeGeneration({ highWaterMark: 4 });
    gen._push(token(1, { finish: NativeFinish.Length }));
    await gen;
    expect(await collect(gen)).toStrictEqual([1]);
    expect(allowTokens).not.toHaveBeenCalled();
  });
});

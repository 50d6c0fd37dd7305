import { describe, expect, it, vi } from 'vitest';
import { EngineError, InternalError, InvalidOptionError } from '../../lib/errors.js';
import { Generation, type GenerationInit } from '../../lib/generation/generation.js';
import type { GenerationChunk, GenerationResult } from '../../lib/generation/result.js';
import { NativeFinish, type NativeStepEvent } from '../../lib/native/addon.js';

const EOS = 2;

/** A Generation as the engine would create it, with a spy in place of the native abort. */
function makeGeneration(init: Partial<GenerationInit> = {}) {
  const requestAbort = vi.fn();
  const now = performance.now();
  const gen = new Generation({
    promptTokens: 3,
    logprobs: false,
    eosTokenIds: [EOS],
    requestAbort,
    startedAt: now,
    submittedAt: now,
    ...init,
  });
  return { gen, requestAbort };
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

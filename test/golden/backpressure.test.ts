// Backpressure (issue 22, point 1): a generation's iterator sets its request's pace. A reader that stops reading
// pauses its own request in the engine, never the batch: the engine generates at most `highWaterMark` tokens
// (default 256) past what the iterator has taken, the other requests run on, and reading afterwards gives every
// token in order. The stated bound, checked here on the engine's own count: unread tokens <= highWaterMark.
//
// The fixtures stop at 1,024 positions (max_position_embeddings in config.json, a number: plain RoPE computes any
// position the same way), so the 10,000-token case runs on a copy of qwen3-f32-v5config whose config allows 16,384.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine, type Generation, type GenerationChunk } from '../../lib/index.js';
import { validateLoadOptions } from '../../lib/engine/load-options.js';
import { nativeAddon } from '../../lib/native/addon.js';
import { fixtureDir, listFixtures, readReference } from '../helpers/fixtures.js';

const FIXTURE = 'qwen3-f32-v5config';
const have = listFixtures().includes(FIXTURE);
const greedyForever = { stopTokenIds: [] as number[] }; // no EOS: only maxTokens ends them

/** Waits (polling on the event loop) until `done()`; the test's own timeout is the limit. */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 1));
}

/** The tokens delivered to `gen` so far (its 'token' events, which fire whether or not anyone reads). */
function delivered(gen: Generation): () => number {
  let n = 0;
  gen.on('token', (chunk) => void (n += chunk.tokenIds.length));
  return () => n;
}

/**
 * Reads the rest of `gen` through `reader`, checking at every chunk that the engine never ran more than `bound`
 * tokens past what was read. Returns the tokens and the chunks' text.
 */
async function readAll(
  reader: AsyncIterator<GenerationChunk>,
  arrived: () => number,
  bound: number,
): Promise<{ tokens: number[]; text: string; mostUnread: number }> {
  const tokens: number[] = [];
  let text = '';
  let mostUnread = 0;
  for (let r = await reader.next(); !r.done; r = await reader.next()) {
    tokens.push(...r.value.tokenIds);
    text += r.value.text ?? '';
    mostUnread = Math.max(mostUnread, arrived() - tokens.length);
  }
  expect(mostUnread).toBeLessThanOrEqual(bound);
  return { tokens, text, mostUnread };
}

/**
 * Reads `gen` (made with `highWaterMark`) in bursts of `burst` chunks, each once the engine has paused it — every
 * token allowed has arrived and the engine counts a paused request (it is the only one) — or it has ended. So it
 * pauses and resumes over and over (a burst of at least three quarters of the mark lets it go on). Returns the
 * pauses seen.
 */
async function readInBursts(
  engine: Engine,
  gen: Generation,
  highWaterMark: number,
  burst: number,
): Promise<{ tokens: number[]; text: string; pauses: number }> {
  const reader = gen[Symbol.asyncIterator]();
  const arrived = delivered(gen);
  let ended = false;
  void gen.finally(() => (ended = true));
  const tokens: number[] = [];
  let text = '';
  let pauses = 0;
  const paused = (): boolean => arrived() - tokens.length === highWaterMark && engine.stats().requestsPaused === 1;
  for (;;) {
    await until(() => ended || paused());
    if (!ended) ++pauses;
    for (let i = 0; i < burst; ++i) {
      const r = await reader.next();
      if (r.done) return { tokens, text, pauses };
      tokens.push(...r.value.tokenIds);
      text += r.value.text ?? '';
    }
  }
}

/** A copy of the fixture whose config allows `positions` positions. */
function longContextCopy(positions: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'vtengine-backpressure-'));
  cpSync(fixtureDir(FIXTURE), dir, { recursive: true });
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, max_position_embeddings: positions }));
  return dir;
}

describe.skipIf(!have)('backpressure: a reader that stops pauses its own request', () => {
  const prompts = have ? readReference(FIXTURE).prompts.map((p) => p.ids) : [];
  let dir: string;
  let engine: Engine;
  beforeAll(async () => {
    dir = longContextCopy(16_384);
    engine = await Engine.load(dir, { device: 'cpu', threads: 2, maxContext: 10_240 });
  });
  afterAll(async () => {
    await engine?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a stream nobody reads while 10,000 tokens are generated holds 256; read afterwards it gives all 10,000 in order', async () => {
    const before = engine.stats();
    const unread = engine.generate({ tokens: prompts[2] }, { maxTokens: 10_000, ...greedyForever });
    const reader = unread[Symbol.asyncIterator](); // taken, never read until the others are done
    const arrived = delivered(unread);
    // The others: the same prompt to 10,000 tokens (awaited, so never paused: the reference for the unread one) and
    // two short requests.
    const others = await Promise.all([
      engine.generate({ tokens: prompts[2] }, { maxTokens: 10_000, ...greedyForever }),
      engine.generate({ tokens: prompts[1] }, { maxTokens: 500, ...greedyForever }),
      engine.generate({ tokens: prompts[3] }, { maxTokens: 500, ...greedyForever }),
    ]);
    expect(others.map((r) => [r.finishReason, r.tokenIds.length])).toEqual([
      ['length', 10_000],
      ['length', 500],
      ['length', 500],
    ]);
    // They all finished while the unread one stayed paused at the bound: the engine generated exactly 256 tokens for
    // it (its own count, not only what reached JS), and has nothing else to run.
    const paused = engine.stats();
    expect(arrived()).toBe(256);
    expect(paused.tokensGenerated - before.tokensGenerated).toBe(11_000 + 256);
    expect(paused).toMatchObject({ requestsPaused: 1, requestsRunning: 0, requestsWaiting: 0 });
    // A paused request leaves the step thread asleep: no step runs while it waits.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(engine.stats().steps).toBe(paused.steps);

    const { tokens } = await readAll(reader, arrived, 256);
    expect(tokens).toEqual(others[0].tokenIds);
    const result = await unread;
    expect(result.finishReason).toBe('length');
    expect(result.tokenIds).toEqual(tokens);
    const after = engine.stats();
    expect(after.tokensGenerated - before.tokensGenerated).toBe(21_000); // none generated twice, none lost
    expect(after).toMatchObject({ requestsPaused: 0, requestsRunning: 0, kvBlocksUsed: 0 });
  });

  it('a reader that reads in bursts pauses and resumes its request many times; the tokens are those of a plain run', async () => {
    const reference = await engine.generate({ tokens: prompts[3] }, { maxTokens: 300, ...greedyForever });
    const gen = engine.generate({ tokens: prompts[3] }, { maxTokens: 300, highWaterMark: 16, ...greedyForever });
    const { tokens, pauses } = await readInBursts(engine, gen, 16, 12);
    expect(tokens).toEqual(reference.tokenIds);
    expect(pauses).toBeGreaterThanOrEqual(Math.floor(300 / 16));
    expect((await gen).finishReason).toBe('length');
  });

  it('the bound holds from the first step, however long the code that called generate() takes to start its loop', async () => {
    // A main thread that stalls (a busy handler, GC, a loaded host) between generate() and its loop: the step
    // thread runs meanwhile, and it once ran 600 tokens past a mark of 8 before the loop's first allowance came.
    const stall = (ms: number): void => {
      for (const end = performance.now() + ms; performance.now() < end; );
    };
    const gen = engine.generate({ tokens: prompts[3] }, { maxTokens: 500, highWaterMark: 8, ...greedyForever });
    stall(100);
    const reader = gen[Symbol.asyncIterator]();
    const arrived = delivered(gen);
    await until(() => engine.stats().requestsPaused === 1);
    await new Promise((resolve) => setTimeout(resolve, 20)); // it stays paused: nothing more arrives
    expect(arrived()).toBe(8);
    const taken = await reader.next();
    expect(taken.value?.tokenIds).toHaveLength(1);
    gen.abort();
    expect((await gen).tokenIds).toHaveLength(8);

    // Not iterated in that tick, a generation is let go: awaited after the same stall, it is never paused.
    const awaited = engine.generate({ tokens: prompts[3] }, { maxTokens: 300, highWaterMark: 8, ...greedyForever });
    stall(100);
    const result = await awaited;
    expect([result.finishReason, result.tokenIds.length]).toEqual(['length', 300]);
    expect(engine.stats()).toMatchObject({ requestsPaused: 0, kvBlocksUsed: 0 });
  });

  it('aborting a paused request, or breaking out of its loop, ends it and frees its blocks', async () => {
    const gen = engine.generate({ tokens: prompts[3] }, { maxTokens: 500, highWaterMark: 8, ...greedyForever });
    const reader = gen[Symbol.asyncIterator]();
    await until(() => engine.stats().requestsPaused === 1);
    gen.abort();
    const result = await gen;
    expect(result.finishReason).toBe('abort');
    expect(result.tokenIds).toHaveLength(8);
    const { tokens } = await readAll(reader, () => 8, 8); // what had arrived is still there to read
    expect(tokens).toEqual(result.tokenIds);
    expect(engine.stats()).toMatchObject({ requestsPaused: 0, kvBlocksUsed: 0 });

    const looped = engine.generate({ tokens: prompts[3] }, { maxTokens: 500, highWaterMark: 8, ...greedyForever });
    for await (const _chunk of looped) {
      await until(() => engine.stats().requestsPaused === 1);
      break;
    }
    expect((await looped).finishReason).toBe('abort');
    expect(engine.stats()).toMatchObject({ requestsPaused: 0, kvBlocksUsed: 0 });
  });

  it('when the KV pool runs dry, a paused request gives its blocks back first and is recomputed when read', async () => {
    // A pool of 1,100 tokens: the unread request holds 600 + 64 positions while paused, the other needs 1,000.
    const probe = engine.stats();
    const perToken = probe.kvCacheBytes / (probe.kvBlocksTotal * probe.kvBlockSize);
    const small = await Engine.load(dir, { device: 'cpu', threads: 2, maxContext: 1_024, kvCacheBytes: Math.ceil(perToken * 1_100) });
    try {
      const reference = await small.generate({ tokens: prompts[4] }, { maxTokens: 200, ...greedyForever });
      const unread = small.generate({ tokens: prompts[4] }, { maxTokens: 200, highWaterMark: 64, ...greedyForever });
      const reader = unread[Symbol.asyncIterator]();
      const arrived = delivered(unread);
      await until(() => small.stats().requestsPaused === 1);
      const before = small.stats();
      expect(before.kvBlocksUsed).toBeGreaterThan(0); // paused, it keeps its KV while there is room
      const other = await small.generate({ tokens: prompts[0] }, { maxTokens: 1_000, ...greedyForever });
      expect(other.tokenIds).toHaveLength(1_000);
      // The running request was never sent back: the paused one's blocks went instead, so none is held now.
      const after = small.stats();
      expect(after.preemptions - before.preemptions).toBe(1);
      expect(after).toMatchObject({ requestsPaused: 1, kvBlocksUsed: 0 });
      const { tokens } = await readAll(reader, arrived, 64);
      expect(tokens).toEqual(reference.tokenIds);
    } finally {
      await small.dispose();
    }
  });

  it('disposing the engine ends a paused request as aborted', async () => {
    const other = await Engine.load(fixtureDir(FIXTURE), { device: 'cpu', threads: 2 });
    const gen = other.generate({ tokens: prompts[3] }, { maxTokens: 500, highWaterMark: 8, ...greedyForever });
    gen[Symbol.asyncIterator]();
    await until(() => other.stats().requestsPaused === 1);
    await other.dispose();
    const result = await gen;
    expect(result.finishReason).toBe('abort');
    expect(result.tokenIds).toHaveLength(8);
  });

  it('a generation that is only awaited, or only listened to, is never paused', async () => {
    const awaited = engine.generate({ tokens: prompts[1] }, { maxTokens: 100, highWaterMark: 1, ...greedyForever });
    const listened = engine.generate({ tokens: prompts[1] }, { maxTokens: 100, highWaterMark: 1, ...greedyForever });
    let heard = 0;
    listened.on('token', () => void ++heard);
    expect((await awaited).tokenIds).toHaveLength(100);
    expect((await listened).tokenIds).toHaveLength(100);
    expect(heard).toBe(100);
  });
});

describe.skipIf(!have)('the native submit: allowedTokens (what generate() sends)', () => {
  it('holds the request from its first step; bad values are ERR_INVALID_OPTION', async () => {
    const params = validateLoadOptions({ device: 'cpu', threads: 1 });
    const tokens: number[] = [];
    const native = await nativeAddon().loadEngine(fixtureDir(FIXTURE), params, () => {}, (events) => {
      for (const e of events) if (e.token >= 0) tokens.push(e.token);
    }, new Int32Array(new SharedArrayBuffer(4)));
    try {
      const request = { maxTokens: 100, temperature: 0, topK: 0, topP: 1, minP: 0, logprobs: 0, stopTokenIds: [] };
      const prompt = Int32Array.from(readReference(FIXTURE).prompts[0].ids);
      for (const allowedTokens of [-2, 1.5, Number.NaN, 2 ** 31]) {
        expect(() => native.submit(prompt, { ...request, allowedTokens }), String(allowedTokens)).toThrow(
          expect.objectContaining({ code: 'ERR_INVALID_OPTION' }),
        );
      }
      native.submit(prompt, { ...request, allowedTokens: 3 }); // nothing else ever allows it more
      await until(() => native.stats().requestsPaused === 1);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(tokens).toHaveLength(3);
      expect(native.stats()).toMatchObject({ requestsPaused: 1, requestsRunning: 0 });
    } finally {
      await native.dispose();
    }
  });
});

describe('backpressure and the text layer (the packaged default model)', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.load({ device: 'cpu', threads: 2 });
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it('text and stop strings come out the same when the request pauses every few tokens', async () => {
    const input = { prompt: 'import os\n\n\ndef ' };
    const options = { maxTokens: 160, ...greedyForever };
    const plain = await engine.generate(input, options);
    const gen = engine.generate(input, { ...options, highWaterMark: 4 });
    const paced = await readInBursts(engine, gen, 4, 3);
    expect(paced.pauses).toBeGreaterThanOrEqual(160 / 4 - 1);
    expect(paced.tokens).toEqual(plain.tokenIds);
    expect(paced.text).toBe(plain.text);
    expect((await gen).text).toBe(plain.text);

    // A stop string that first appears in the second half of the text.
    const text = plain.text!;
    const at = [...Array(text.length - 4).keys()].find((i) => i > text.length / 2 && text.indexOf(text.slice(i, i + 4)) === i);
    expect(at).toBeDefined();
    const stop = [text.slice(at!, at! + 4)];
    const stopped = await engine.generate(input, { ...options, stop });
    expect(stopped.finishReason).toBe('stop');
    expect(stopped.text).toBe(text.slice(0, at));
    const gen2 = engine.generate(input, { ...options, stop, highWaterMark: 4 });
    const paced2 = await readInBursts(engine, gen2, 4, 3);
    expect(paced2.text).toBe(stopped.text);
    expect(paced2.tokens).toEqual(stopped.tokenIds);
    expect(await gen2).toMatchObject({ finishReason: 'stop', text: stopped.text });
  });
});

/**
 * The handle `engine.generate()` returns: one request's token stream, its result and its events.
 * @module
 */
import { EventEmitter } from 'eventemitter3';
import { type EngineError, InternalError, InvalidOptionError } from '../errors.js';
import { NativeFinish, type NativeStepEvent } from '../native/addon.js';
import { INT32_MAX } from '../validation.js';
import type { FinishReason, GenerationChunk, GenerationResult, GenerationUsage, TokenLogprob } from './result.js';
import type { TextOutput } from './text-output.js';

/** The events a {@link Generation} emits, with their arguments. */
export interface GenerationEvents {
  /** New tokens, as the iterator yields them. */
  token: [chunk: GenerationChunk];
  /** The generation ended (normally or aborted), with the result the promise resolves with. */
  end: [result: GenerationResult];
  /** The engine failed while running it, with the error the promise rejects with. */
  error: [error: EngineError];
}

/** What the engine tells a Generation when it creates it. @internal */
export interface GenerationInit {
  /** Tokens of the prompt, for usage when the engine cannot report it. */
  promptTokens: number;
  /** Whether the request asked for logprobs. */
  logprobs: boolean;
  /** The model's end-of-sequence ids: an EOS finish on another id is reported as 'stop'. */
  eosTokenIds: readonly number[];
  /** Asks the engine to end the request; the engine answers with an Abort finish event. */
  requestAbort: () => void;
  /** Backpressure: lets the request generate `tokens` tokens in all, after which the engine pauses it. */
  allowTokens: (tokens: number) => void;
  /** How many tokens the engine may generate ahead of the iterator's reader (GenerateOptions.highWaterMark). */
  highWaterMark: number;
  /**
   * The request was submitted allowed `highWaterMark` tokens (the native allowedTokens), so the bound holds from its
   * first step for a loop taken in the same tick. Unless the iterator is taken before the next microtask, the
   * generation lifts that limit (allowTokens(-1)): it is awaited or followed through events, and never paused.
   */
  heldFromStart?: boolean;
  /**
   * The request is now paused for its reader (every token allowed has arrived, none is due), or no longer: such a
   * request waits on JS alone, so it must not keep the process alive.
   */
  readerPaused: (paused: boolean) => void;
  /** The text side (detokenizer and stop strings), when the engine has a tokenizer. */
  text?: TextOutput;
  signal?: AbortSignal;
  /** performance.now() when generate() was called, and when the request was submitted. */
  startedAt: number;
  submittedAt: number;
}

type Outcome = { result: GenerationResult } | { error: EngineError };
type Waiter = { resolve: (r: IteratorResult<GenerationChunk>) => void; reject: (e: unknown) => void };

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * One generation request, returned at once by `engine.generate()`. It is three things at the same time, and all
 * three see the same tokens:
 *
 * - an **async iterable** of {@link GenerationChunk}s (`for await (const chunk of gen)`). Only one loop may iterate
 *   it; chunks produced before the loop starts are kept for it. Leaving the loop early (`break`, `return`, a throw)
 *   aborts the generation.
 * - a **promise** of the {@link GenerationResult} (`await gen`, `gen.then(...)`).
 * - an **event emitter** (eventemitter3) of `'token'`, `'end'` and `'error'` (see {@link GenerationEvents}). An
 *   `'error'` without a listener is not thrown: the promise and the iterator carry it too.
 *
 * Aborting — {@link Generation.abort}, the `signal` option, leaving a `for await` loop early, or `engine.dispose()` —
 * is not an error: the generation ends, the promise resolves with the tokens so far and `finishReason: 'abort'`,
 * and the iterator ends normally. A failure of the engine rejects the promise with an {@link EngineError}, makes the
 * iterator throw it (after the chunks that came before it) and emits `'error'`.
 *
 * Chunks wait in memory until the iterator takes them, but not without bound: the engine generates at most
 * `highWaterMark` tokens (default 256, an option of `generate()`) ahead of what the iterator has taken, from the
 * request's first step when the iterator is taken in the tick that called `generate()` (as `for await` on it does),
 * else from the moment it is taken (tokens generated before then wait in its queue). A loop that stops reading
 * pauses its own request in the engine, not the others, and holds at most that many unread chunks (one token each,
 * plus the last, text-only chunk some generations end with); it resumes when the loop has taken all but a quarter
 * of them, and nothing is lost or repeated. While it is paused
 * its promise and its `'token'` events wait too. A generation nobody iterates is never paused: awaiting it or
 * listening to `'token'` takes every token as it comes (the chunks are still kept for a loop that starts later).
 *
 * @example
 * ```ts
 * const gen = engine.generate({ tokens: [1, 15043, 29892] }, { maxTokens: 32 });
 * for await (const chunk of gen) process.stdout.write(chunk.tokenIds.join(' ') + ' ');
 * const { finishReason, usage } = await gen;
 * ```
 */
export class Generation
  extends EventEmitter<GenerationEvents>
  implements AsyncIterable<GenerationChunk>, PromiseLike<GenerationResult>
{
  readonly #init: GenerationInit;
  readonly #eos: ReadonlySet<number>;
  readonly #tokenIds: number[] = [];
  readonly #logprobs: TokenLogprob[] | undefined;
  readonly #promise: Promise<GenerationResult>;
  #resolve!: (result: GenerationResult) => void;
  #reject!: (error: EngineError) => void;
  #outcome: Outcome | undefined;
  #abortRequested = false;
  #firstTokenAt: number | undefined;
  #lastTokenAt: number | undefined;
  // The iterator's side: chunks not yet taken, or calls of next() waiting for one.
  readonly #queue: GenerationChunk[] = [];
  readonly #waiters: Waiter[] = [];
  #iterated = false;
  #iteratorClosed = false;
  #errorDelivered = false;
  // Backpressure: tokens the iterator has taken, and how many the engine may generate in all (undefined, meaning no
  // limit, until the iterator is taken).
  #tokensRead = 0;
  #allowed: number | undefined;
  #granted: number; // what the engine was last allowed (-1: no limit), so the same allowance is not sent twice
  #pausedForReader = false;

  /** @internal Created by the engine only. */
  constructor(init: GenerationInit) {
    super();
    this.#init = init;
    this.#eos = new Set(init.eosTokenIds);
    this.#logprobs = init.logprobs ? [] : undefined;
    this.#promise = new Promise<GenerationResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // A caller who only iterates, or only listens, must not get an unhandledRejection for the promise they ignore.
    this.#promise.catch(() => {});
    init.signal?.addEventListener('abort', this.#onSignalAbort, { once: true });
    this.#granted = init.heldFromStart ? init.highWaterMark : -1;
    // Microtasks run before any step event can arrive (those come as macrotasks), so the decision is made before
    // the first token is seen, whatever the step thread did meanwhile.
    if (init.heldFromStart) queueMicrotask(() => void (this.#iterated || this.#outcome || this.#grant(-1)));
  }

  /**
   * Ends the generation early. The promise then resolves with the tokens generated so far and
   * `finishReason: 'abort'` (or with the natural finish, if the engine got there first), and the iterator ends
   * without an error. Does nothing once the generation has ended; safe to call more than once.
   */
  abort(): void {
    if (this.#outcome || this.#abortRequested) return;
    this.#abortRequested = true;
    this.#checkPause(); // its abort event is now due
    this.#init.requestAbort();
  }

  /**
   * Attaches callbacks for the result, like `Promise.prototype.then`; this is what makes `await gen` work.
   * @param onfulfilled - called with the {@link GenerationResult}.
   * @param onrejected - called with the {@link EngineError} when the engine failed.
   */
  then<TResult1 = GenerationResult, TResult2 = never>(
    onfulfilled?: ((result: GenerationResult) => TResult1 | PromiseLike<TResult1>) | null,
    onrejected?: ((reason: unknown) => TResult2 | PromiseLike<TResult2>) | null,
  ): Promise<TResult1 | TResult2> {
    return this.#promise.then(onfulfilled, onrejected);
  }

  /**
   * Attaches a callback for a failure, like `Promise.prototype.catch`.
   * @param onrejected - called with the {@link EngineError} when the engine failed.
   */
  catch<TResult = never>(
    onrejected?: ((reason: unknown) => TResult | PromiseLike<TResult>) | null,
  ): Promise<GenerationResult | TResult> {
    return this.#promise.catch(onrejected);
  }

  /**
   * Attaches a callback for the end, whatever it is, like `Promise.prototype.finally`.
   * @param onfinally - called once the generation has ended or failed.
   */
  finally(onfinally?: (() => void) | null): Promise<GenerationResult> {
    return this.#promise.finally(onfinally);
  }

  /**
   * Returns the iterator of the chunks. A generation has one consumer: a second call throws an
   * {@link InvalidOptionError}. Its `return()` (run when a `for await` loop is left early) aborts the generation.
   */
  [Symbol.asyncIterator](): AsyncIterator<GenerationChunk> {
    if (this.#iterated) {
      throw new InvalidOptionError(
        'This generation is already being iterated. A generation has one consumer: listen to its "token" event, ' +
          'or await it, to follow it from more than one place.',
      );
    }
    this.#iterated = true;
    if (!this.#outcome) this.#allowMore(); // from now on, the loop sets the pace
    return {
      next: () => this.#next(),
      return: () => {
        this.#closeIterator();
        this.abort();
        return Promise.resolve(DONE);
      },
    };
  }

  /** @internal Feeds one of this request's step events, in the engine's order. */
  _push(event: NativeStepEvent): void {
    if (this.#outcome) return;
    if (event.promptLogprobs) this._promptLogprobs.push(...event.promptLogprobs);
    const finishing = event.finish !== NativeFinish.None;
    if (event.token >= 0) this.#addToken(event, finishing);
    if (finishing && !this.#outcome) this.#finish(event);
    this.#checkPause();
  }

  /** @internal Teacher-forced logprobs of prompt tokens 1.., when the request asked for them (Engine.score). */
  readonly _promptLogprobs: number[] = [];

  /** @internal Ends the generation as aborted when the engine will not report it (disposed, or never submitted). */
  _abandon(): void {
    if (this.#outcome) return;
    this.#flushText();
    this.#complete('abort', { promptTokens: this.#init.promptTokens, completionTokens: this.#tokenIds.length });
  }

  #onSignalAbort = (): void => this.abort();

  #addToken(event: NativeStepEvent, finishing: boolean): void {
    const now = performance.now();
    this.#firstTokenAt ??= now;
    this.#lastTokenAt = now;
    this.#tokenIds.push(event.token);
    const chunk: GenerationChunk = { tokenIds: [event.token] };
    if (this.#logprobs) {
      const logprob = toTokenLogprob(event);
      this.#logprobs.push(logprob);
      chunk.logprobs = [logprob];
    }
    const text = this.#init.text;
    if (text) {
      // The stop or EOS id that ends the generation stays in tokenIds but adds nothing to the text.
      chunk.text = finishing && event.finish === NativeFinish.Eos ? '' : text.push([event.token]);
      if (finishing) chunk.text += text.finish();
    }
    this.#deliver(chunk);
    if (text?.stopped && !finishing) {
      // A stop string: the text is complete; end now and let the engine drop the request.
      this.#complete('stop', { promptTokens: this.#init.promptTokens, completionTokens: this.#tokenIds.length });
      this.#init.requestAbort();
    }
  }

  /** Emits, as a last chunk without ids, the text still held back when the generation ends without a token. */
  #flushText(): void {
    const tail = this.#init.text?.finish();
    if (tail) this.#deliver({ tokenIds: [], text: tail });
  }

  #deliver(chunk: GenerationChunk): void {
    if (!this.#iteratorClosed) {
      const waiter = this.#waiters.shift();
      if (waiter) {
        this.#taken(chunk);
        waiter.resolve({ done: false, value: chunk });
      } else this.#queue.push(chunk);
    }
    emitSafely(() => this.emit('token', chunk));
  }

  #finish(event: NativeStepEvent): void {
    if (event.finish !== NativeFinish.Error) this.#flushText();
    const usage: GenerationUsage = {
      promptTokens: event.promptTokens ?? this.#init.promptTokens,
      completionTokens: event.completionTokens ?? this.#tokenIds.length,
    };
    switch (event.finish) {
      case NativeFinish.Eos: {
        const last = this.#tokenIds.at(-1);
        return this.#complete(last === undefined || this.#eos.has(last) ? 'eos' : 'stop', usage);
      }
      case NativeFinish.Length:
        // A stop string completed by the very last token still cut the text there.
        return this.#complete(this.#init.text?.stopped ? 'stop' : 'length', usage);
      case NativeFinish.Abort:
        return this.#complete('abort', usage);
      case NativeFinish.Error:
        return this.#fail(
          new InternalError(
            `The engine failed while generating: ${event.message ?? 'no reason given'}. ` +
              'The request was ended; other requests go on. Please report this if it repeats.',
          ),
        );
      default:
        return this.#fail(new InternalError(`The engine sent an unknown finish code ${String(event.finish)}. Please report this.`));
    }
  }

  #complete(finishReason: FinishReason, usage: GenerationUsage): void {
    const result: GenerationResult = {
      tokenIds: [...this.#tokenIds],
      finishReason,
      usage,
      timings: this.#timings(),
    };
    if (this.#init.text) result.text = this.#init.text.text;
    if (this.#logprobs) result.logprobs = [...this.#logprobs];
    this.#settle({ result });
    this.#resolve(result);
    emitSafely(() => this.emit('end', result));
  }

  #fail(error: EngineError): void {
    this.#settle({ error });
    this.#reject(error);
    emitSafely(() => this.emit('error', error));
  }

  #settle(outcome: Outcome): void {
    this.#outcome = outcome;
    this.#checkPause();
    this.#init.signal?.removeEventListener('abort', this.#onSignalAbort);
    // Waiters exist only while the queue is empty: the first one gets the error, if any; all end.
    for (const waiter of this.#waiters.splice(0)) {
      if ('error' in outcome && !this.#errorDelivered) {
        this.#errorDelivered = true;
        waiter.reject(outcome.error);
      } else waiter.resolve(DONE);
    }
  }

  #next(): Promise<IteratorResult<GenerationChunk>> {
    const chunk = this.#queue.shift();
    if (chunk) {
      this.#taken(chunk);
      return Promise.resolve({ done: false, value: chunk });
    }
    if (this.#iteratorClosed) return Promise.resolve(DONE);
    const outcome = this.#outcome;
    if (outcome) {
      if ('error' in outcome && !this.#errorDelivered) {
        this.#errorDelivered = true;
        return Promise.reject(outcome.error);
      }
      return Promise.resolve(DONE);
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /**
   * Counts a chunk the iterator took. Once the engine's lead over the reader is down to a quarter of the high-water
   * mark, it may run a whole high-water mark ahead again: one native call per three quarters of it read, and a
   * reader that keeps up never finds the request paused.
   */
  #taken(chunk: GenerationChunk): void {
    this.#tokensRead += chunk.tokenIds.length;
    const allowed = this.#allowed;
    if (allowed === undefined || this.#outcome) return;
    if (allowed - this.#tokensRead <= Math.floor(this.#init.highWaterMark / 4)) this.#allowMore();
  }

  /** Lets the engine generate up to a high-water mark past what the iterator has taken. */
  #allowMore(): void {
    this.#allowed = Math.min(this.#tokensRead + this.#init.highWaterMark, INT32_MAX);
    this.#grant(this.#allowed);
    this.#checkPause();
  }

  #grant(tokens: number): void {
    if (tokens === this.#granted) return;
    this.#granted = tokens;
    this.#init.allowTokens(tokens);
  }

  /**
   * Tells the engine when the request starts or stops waiting on its reader alone: every token it was allowed has
   * arrived, and no event is due (no abort asked, not ended).
   */
  #checkPause(): void {
    const allowed = this.#allowed;
    const paused = allowed !== undefined && this.#tokenIds.length >= allowed && !this.#outcome && !this.#abortRequested;
    if (paused === this.#pausedForReader) return;
    this.#pausedForReader = paused;
    this.#init.readerPaused(paused);
  }

  #closeIterator(): void {
    this.#iteratorClosed = true;
    this.#queue.length = 0;
    for (const waiter of this.#waiters.splice(0)) waiter.resolve(DONE);
  }

  #timings(): GenerationResult['timings'] {
    const { startedAt, submittedAt } = this.#init;
    const end = performance.now();
    const first = this.#firstTokenAt;
    const last = this.#lastTokenAt ?? first;
    const decodeMs = first !== undefined && last !== undefined ? last - first : 0;
    const decoded = this.#tokenIds.length - 1; // tokens after the first, which decodeMs covers
    return {
      queuedMs: submittedAt - startedAt,
      prefillMs: first !== undefined ? first - submittedAt : 0,
      decodeMs,
      totalMs: end - startedAt,
      tokensPerSecond: decoded > 0 && decodeMs > 0 ? (decoded * 1000) / decodeMs : 0,
    };
  }
}

function toTokenLogprob(event: NativeStepEvent): TokenLogprob {
  const topIds = event.topIds ?? [];
  return {
    tokenId: event.token,
    logprob: event.logprob ?? Number.NaN,
    top: topIds.map((tokenId, i) => ({ tokenId, logprob: event.topLogprobs?.[i] ?? Number.NaN })),
  };
}

/**
 * Runs a listener call so that a listener that throws cannot leave the generation (or the engine's routing of
 * other requests' tokens) half updated: the throw is re-raised on its own, as an uncaught exception, the way a
 * throwing listener behaves anywhere in Node.
 */
function emitSafely(emit: () => void): void {
  try {
    emit();
  } catch (err) {
    queueMicrotask(() => {
      throw err;
    });
  }
}

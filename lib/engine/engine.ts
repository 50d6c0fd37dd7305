/**
 * The engine: a loaded model, its KV pool and its step loop (native), and the routing of each step's tokens to the
 * generations they belong to.
 * @module
 */
import path from 'node:path';
import { AbortError, DisposedError, InternalError, InvalidOptionError, fromNativeError } from '../errors.js';
import { Generation, type GenerationInit } from '../generation/generation.js';
import { type GenerateInput, type GenerateOptions, validateGenerateInput, validateGenerateOptions } from '../generation/options.js';
import { type NativeAddon, type NativeEngine, NativeFinish, type NativeStepEvent, nativeAddon } from '../native/addon.js';
import { show } from '../validation.js';
import { type LoadOptions, validateLoadOptions } from './load-options.js';
import { type EngineStats, type ModelInfo, toEngineStats, toModelInfo } from './model-info.js';

/**
 * A loaded model, ready to generate. Create one with {@link Engine.load}; free it with {@link Engine.dispose} (or
 * `await using`). Many generations may run at once: the engine batches them in each step.
 *
 * After `dispose()`, every method throws a {@link DisposedError}.
 */
export class Engine implements AsyncDisposable {
  /** Facts about the loaded model. */
  readonly modelInfo: ModelInfo;
  readonly #native: NativeEngine;
  /** Generations the engine has not finished yet, by native request id. */
  readonly #live = new Map<number, Generation>();
  #disposed = false;
  #disposal: Promise<void> | undefined;

  private constructor(native: NativeEngine, modelInfo: ModelInfo) {
    this.#native = native;
    this.modelInfo = modelInfo;
  }

  /**
   * Loads a Hugging Face checkpoint folder (`config.json`, `*.safetensors`, …) on a worker thread.
   *
   * @param dir - the checkpoint folder, absolute or relative to the current directory.
   * @param options - see {@link LoadOptions}.
   * @returns the engine, once the weights are in place and the KV pool is allocated.
   * @throws (rejects with) an {@link EngineError}: {@link InvalidOptionError} for bad options,
   * {@link ModelNotFoundError}, {@link MissingFileError}, {@link BadCheckpointError}, {@link TruncatedCheckpointError},
   * {@link UnsupportedArchitectureError}, {@link UnsupportedDtypeError}, {@link ShapeMismatchError} for a checkpoint
   * it cannot use, {@link OutOfMemoryError}, {@link NoGpuError} for `device: 'cuda'` without a usable GPU, and
   * {@link AbortError} when `options.signal` is aborted.
   *
   * @example
   * ```ts
   * import { Engine } from 'vtengine';
   *
   * const engine = await Engine.load('./models/Qwen3-0.6B', {
   *   device: 'auto',
   *   maxContext: 4096,
   *   onProgress: ({ fraction, stage }) => console.log(`${stage} ${Math.round(fraction * 100)}%`),
   * });
   * console.log(engine.modelInfo.architecture, engine.device);
   * ```
   */
  static async load(dir: string, options?: LoadOptions): Promise<Engine> {
    const params = validateLoadOptions(options);
    if (typeof dir !== 'string' || dir.length === 0) {
      throw new InvalidOptionError(`Engine.load needs the path of a checkpoint folder (with config.json), got ${show(dir)}.`);
    }
    const { onProgress, signal } = options ?? {};
    if (signal?.aborted) throw new AbortError('Engine.load was aborted before it started.', { cause: signal.reason });
    const addon = loadAddon();

    const cancel = new Int32Array(new SharedArrayBuffer(4));
    const stop = (): void => void Atomics.store(cancel, 0, 1);
    let settled = false;
    let progressFailure: { error: unknown } | undefined;
    let engine: Engine | undefined;
    const progress = (fraction: number, stage: string): void => {
      if (settled || progressFailure || !onProgress) return;
      try {
        onProgress({ fraction, stage });
      } catch (error) {
        progressFailure = { error };
        stop();
      }
    };
    // Installed before the engine object exists; no request (so no step) can come before it does.
    const onStep = (events: NativeStepEvent[]): void => {
      if (engine) engine.#route(events);
    };

    signal?.addEventListener('abort', stop, { once: true });
    let native: NativeEngine;
    try {
      native = await addon.loadEngine(path.resolve(dir), params, progress, onStep, cancel);
    } catch (err) {
      if (progressFailure) throw progressFailure.error;
      throw fromNativeError(err);
    } finally {
      settled = true;
      signal?.removeEventListener('abort', stop);
    }

    // An abort that came too late to stop the native load still wins: the caller asked for no engine.
    if (progressFailure || signal?.aborted) {
      await native.dispose().catch(() => {});
      if (progressFailure) throw progressFailure.error;
      throw new AbortError('Engine.load was aborted; the model it had loaded was freed.', { cause: signal?.reason });
    }
    try {
      engine = new Engine(native, toModelInfo(native.modelInfo()));
    } catch (err) {
      await native.dispose().catch(() => {});
      throw fromNativeError(err);
    }
    return engine;
  }

  /** Where the model runs: `'cpu'` or `'cuda'` (what `device: 'auto'` picked). */
  get device(): 'cpu' | 'cuda' {
    return this.modelInfo.device;
  }

  /** Whether {@link Engine.dispose} has been called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Starts generating from a prompt and returns its {@link Generation} at once: iterate it for the tokens as they
   * come, await it for the result, or listen to its events.
   *
   * Checks happen before anything is queued, and a bad input or option THROWS here, synchronously (it does not
   * become a rejected generation).
   *
   * @param input - the prompt; see {@link GenerateInput}.
   * @param options - sampling and stopping; see {@link GenerateOptions}.
   * @throws {@link InvalidOptionError} for a bad input or option (an id outside the vocabulary included),
   * {@link ContextOverflowError} when the prompt leaves no room in `modelInfo.maxContext`, {@link DisposedError}
   * after `dispose()`.
   *
   * @example
   * ```ts
   * const gen = engine.generate({ tokens: promptIds }, { maxTokens: 64, temperature: 0.7, seed: 42 });
   * for await (const { tokenIds } of gen) console.log(tokenIds);
   * const { finishReason, usage, timings } = await gen;
   * console.log(finishReason, usage.completionTokens, `${timings.tokensPerSecond.toFixed(1)} tok/s`);
   * ```
   */
  generate(input: GenerateInput, options?: GenerateOptions): Generation {
    this.#checkLive('generate');
    const startedAt = performance.now();
    const limits = { maxContext: this.modelInfo.maxContext, vocabSize: this.modelInfo.vocabSize };
    const tokens = validateGenerateInput(input, limits);
    const params = validateGenerateOptions(options, limits);
    const init: Omit<GenerationInit, 'requestAbort' | 'submittedAt'> = {
      promptTokens: tokens.length,
      logprobs: params.logprobs > 0,
      eosTokenIds: this.modelInfo.eosTokenIds,
      signal: options?.signal,
      startedAt,
    };
    if (options?.signal?.aborted) {
      // Aborted before it started: the same outcome as any abort (an empty result), without touching the engine.
      const gen = new Generation({ ...init, submittedAt: startedAt, requestAbort: () => {} });
      queueMicrotask(() => gen._abandon());
      return gen;
    }
    let id: number;
    try {
      id = this.#native.submit(tokens, params);
    } catch (err) {
      throw fromNativeError(err);
    }
    const gen = new Generation({ ...init, submittedAt: performance.now(), requestAbort: () => this.#abort(id) });
    this.#live.set(id, gen);
    return gen;
  }

  /** The engine's live counters: KV blocks in use, queued and running requests, steps. */
  stats(): EngineStats {
    this.#checkLive('stats');
    try {
      return toEngineStats(this.#native.stats());
    } catch (err) {
      throw fromNativeError(err);
    }
  }

  /**
   * Frees the model, the KV pool and the step thread. Every live generation ends as aborted (its promise resolves
   * with `finishReason: 'abort'`). Safe to call more than once: later calls return the first call's promise.
   */
  dispose(): Promise<void> {
    this.#disposal ??= this.#dispose();
    return this.#disposal;
  }

  /** Same as {@link Engine.dispose}, for `await using engine = await Engine.load(...)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  async #dispose(): Promise<void> {
    this.#disposed = true;
    try {
      await this.#native.dispose();
    } catch (err) {
      throw fromNativeError(err);
    } finally {
      // The native side ends each live request with an Abort event, but the last events may still be on their way
      // to this thread; end what is left here so that every generation has settled when dispose() resolves.
      for (const gen of this.#live.values()) gen._abandon();
      this.#live.clear();
    }
  }

  #route(events: NativeStepEvent[]): void {
    for (const event of events) {
      const gen = this.#live.get(event.id);
      if (!gen) continue; // already ended here (dispose): late events have nowhere to go
      if (event.finish !== NativeFinish.None) this.#live.delete(event.id);
      gen._push(event);
    }
  }

  #abort(id: number): void {
    if (!this.#disposed && this.#live.has(id)) this.#native.abort(id);
  }

  #checkLive(method: string): void {
    if (this.#disposed) {
      throw new DisposedError(`Engine.${method}() was called after dispose(). Load a new engine with Engine.load().`);
    }
  }
}

function loadAddon(): NativeAddon {
  try {
    return nativeAddon();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new InternalError(
      `The vtengine native addon could not be loaded (${reason}). Reinstall vtengine for this platform, ` +
        'or build it from source with "npm run build:native".',
      { cause: err },
    );
  }
}

/**
 * The engine: a loaded model, its KV pool and its step loop (native), and the routing of each step's tokens to the
 * generations they belong to.
 * @module
 */
import path from 'node:path';
import type { ChatMessage, ChatTemplateOptions } from '../chat/template.js';
import { AbortError, DisposedError, InternalError, InvalidOptionError, NoTokenizerError, fromNativeError } from '../errors.js';
import { Generation, type GenerationInit } from '../generation/generation.js';
import {
  DEFAULT_HIGH_WATER_MARK,
  type GenerateInput,
  type GenerateOptions,
  inputForm,
  validateGenerateInput,
  validateGenerateOptions,
  validateHighWaterMark,
  validateTextOptions,
} from '../generation/options.js';
import { TextLayer } from '../tokenizer/text-layer.js';
import type { DetokenizeOptions, TokenizeOptions } from '../tokenizer/tokenizer.js';
import {
  type NativeAddon,
  type NativeEngine,
  NativeFinish,
  type NativeLoadParams,
  type NativeMemory,
  type NativeStepEvent,
  type NativeSystemInfo,
  nativeAddon,
  nativeAddonBinary,
} from '../native/addon.js';
import { show, tokenIdsOption } from '../validation.js';
import { type LoadOptions, validateLoadOptions } from './load-options.js';
import { type EngineStats, type ModelInfo, toEngineStats, toModelInfo } from './model-info.js';
import type { ScoreResult } from './score.js';
import { DEFAULT_MODEL_DIR } from './default-model.js';
import { type GenerationDefaults, readGenerationDefaults } from '../generation/defaults.js';
import { estimateMemory, explainOutOfMemory } from '../memory/estimate.js';
import { takeSnapshot } from '../memory/snapshot.js';
import { MemoryTracker, NO_GPU, nvmlGpuSampler } from '../memory/tracker.js';
import type { MemoryEstimate, MemorySnapshot, TrackMemoryOptions } from '../memory/types.js';
import { nvml } from '../memory/nvml.js';
import { packageVersion } from '../package-root.js';
import { type SystemInfo, toSystemInfo } from './system-info.js';

/** A promise's outcome as a value, so that a rejection nobody awaits yet is not an unhandled rejection. */
function settle<T>(p: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  return p.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
}

/** The checkpoint's defaults under the caller's options (anything but a plain object goes to the validator as is). */
function withDefaults(defaults: GenerationDefaults, options: unknown): unknown {
  if (options === undefined) return { ...defaults };
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return options;
  return { ...defaults, ...options };
}

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
  /** The tokenizer and chat template; undefined when the checkpoint has no tokenizer.json. */
  readonly #text: TextLayer | undefined;
  /** Generations the engine has not finished yet, by native request id. */
  readonly #live = new Map<number, Generation>();
  /** Live generations paused for readers that stopped reading (backpressure). */
  #pausedForReaders = 0;
  /** Memory trackers not stopped yet; dispose() stops them. */
  readonly #trackers = new Set<MemoryTracker>();
  #disposed = false;
  #disposal: Promise<void> | undefined;

  /**
   * The sampling settings `generate()` uses for options you leave out: the checkpoint's generation_config.json
   * as transformers reads it (greedy unless it sets `do_sample: true`).
   */
  readonly generationDefaults: Readonly<GenerationDefaults>;

  private constructor(native: NativeEngine, modelInfo: ModelInfo, text: TextLayer | undefined, defaults: GenerationDefaults) {
    this.#native = native;
    this.generationDefaults = Object.freeze({ ...defaults });
    this.#text = text;
    // The default stop ids also hold the tokenizer's EOS and its template's end-of-turn token (Qwen's <|im_end|>).
    const eos = text ? text.stopTokenIds(modelInfo.eosTokenIds).slice(0, 16) : modelInfo.eosTokenIds;
    this.modelInfo = Object.freeze({ ...modelInfo, eosTokenIds: Object.freeze([...eos]) });
  }

  /**
   * Loads the packaged default model ({@link DEFAULT_MODEL_DIR}): a tiny Qwen3 trained on Python's standard
   * library, for trying the SDK out. The same as `Engine.load(DEFAULT_MODEL_DIR, options)`.
   *
   * @param options - see {@link LoadOptions}.
   */
  static async load(options?: LoadOptions): Promise<Engine>;
  /**
   * Loads a Hugging Face checkpoint folder (`config.json`, `*.safetensors`, …) on a worker thread.
   *
   * @param dir - the checkpoint folder, absolute or relative to the current directory. Leave it out (pass the
   * options first, or nothing) to load the packaged default model ({@link DEFAULT_MODEL_DIR}): a tiny Qwen3 trained
   * on Python's standard library, for trying the SDK out. A `dir` that is `undefined`, `null` or `''` is an
   * {@link InvalidOptionError}, not the default model: `Engine.load(process.env.MODEL)` with the variable unset
   * fails rather than loading the toy (write `Engine.load(process.env.MODEL ?? DEFAULT_MODEL_DIR)` to mean it).
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
  static async load(dir: string, options?: LoadOptions): Promise<Engine>;
  static async load(...args: [] | [LoadOptions?] | [string, LoadOptions?]): Promise<Engine> {
    const { dir, options, params } = loadTarget('load', args);
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
    // The tokenizer and generation_config.json load on the JS thread while the weights load natively; their
    // failures wait for the native load (whose error wins), and are caught here so that none is left unhandled when
    // the native load fails first.
    const defaultsLoad = settle(readGenerationDefaults(path.resolve(dir)));
    const textLoad = settle(TextLayer.load(path.resolve(dir)));
    let native: NativeEngine;
    try {
      native = await addon.loadEngine(path.resolve(dir), params, progress, onStep, cancel);
    } catch (err) {
      if (progressFailure) throw progressFailure.error;
      // Name the option that would make it fit, with the figure, from the estimate of the same options.
      throw await explainOutOfMemory(fromNativeError(err), addon, path.resolve(dir), params);
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
    const [text, defaults] = await Promise.all([textLoad, defaultsLoad]);
    try {
      if ('error' in text) throw text.error;
      if ('error' in defaults) throw defaults.error;
      engine = new Engine(native, toModelInfo(native.modelInfo()), text.value, defaults.value);
    } catch (err) {
      await native.dispose().catch(() => {});
      throw fromNativeError(err);
    }
    return engine;
  }

  /**
   * What loading `dir` with `options` would take, by tier, computed from `config.json` and the safetensors headers
   * before anything is loaded, and whether it fits in the memory available now. The KV pool and workspace figures
   * come from the code `Engine.load` sizes them with, so they equal what the loaded engine's {@link Engine.memory}
   * reports.
   *
   * @param dir - the checkpoint folder, absolute or relative to the current directory.
   * @param options - the {@link LoadOptions} you would load with, checked as `Engine.load` checks them.
   * @returns the estimate; when it does not fit, `suggestion` says which option to change (maxContext,
   * kvCacheBytes, maxSeqs...) and `suggestedOptions` holds values that would fit.
   * @throws (rejects with) {@link InvalidOptionError} for bad options; the checkpoint errors of {@link Engine.load}.
   *
   * @example
   * ```ts
   * const est = await Engine.estimate('./models/Qwen3-0.6B', { maxContext: 32768 });
   * if (!est.fits) console.error(est.suggestion);
   * console.log(est.totals); // { hostHeapBytes, pageCacheBytes, deviceBytes }
   * ```
   */
  static async estimate(dir: string, options?: LoadOptions): Promise<MemoryEstimate>;
  /**
   * What loading the packaged default model ({@link DEFAULT_MODEL_DIR}) with `options` would take. The same as
   * `Engine.estimate(DEFAULT_MODEL_DIR, options)`.
   *
   * @param options - see {@link LoadOptions}.
   */
  static async estimate(options?: LoadOptions): Promise<MemoryEstimate>;
  static async estimate(...args: [] | [LoadOptions?] | [string, LoadOptions?]): Promise<MemoryEstimate> {
    const { dir, params } = loadTarget('estimate', args);
    return estimateMemory(loadAddon(), path.resolve(dir), params);
  }

  /**
   * What this machine and this install can run, without loading a model: which native binary was loaded (a
   * prebuild or a local build, and its path), the CPU features and the SIMD path the CPU backend takes, the CUDA
   * targets embedded in the binary, the NVIDIA driver and its version, each GPU (name, compute capability, memory)
   * with whether a cubin for it is embedded or PTX would be JIT-compiled, whether cuBLASLt and NVML were found, and
   * what `device: 'auto'` picks and why. Anything missing (no driver, no GPU, no kernels in this build) is reported
   * with a reason, never thrown. `vtengine doctor` prints the same report.
   *
   * Synchronous. The first call of a process opens the driver and cuBLASLt if present (they stay loaded, as they
   * would for an engine), which on a large GPU takes about as long as `cuInit`, up to a second or so.
   *
   * @throws {@link InternalError} when the native addon itself cannot be loaded (no binary for this platform).
   * @example
   * ```ts
   * const info = Engine.systemInfo();
   * console.log(info.auto); // { device: 'cpu', reason: 'no NVIDIA driver: libcuda.so.1 could not be loaded (...)' }
   * for (const gpu of info.cuda.gpus) console.log(gpu.name, gpu.arch, gpu.kernels, gpu.reason ?? 'usable');
   * ```
   */
  static systemInfo(): SystemInfo {
    const addon = loadAddon();
    let native: NativeSystemInfo;
    try {
      native = addon.systemInfo();
    } catch (err) {
      throw fromNativeError(err);
    }
    return toSystemInfo(native, nativeAddonBinary(), nvml.available(), packageVersion());
  }

  /**
   * A snapshot of memory: this process (PSS, RSS, USS, swap from procfs), the machine (total and MemAvailable), the
   * engine's own accounting (weights by tier, KV blocks and pool, workspaces, a per-component list) and, on a CUDA
   * engine, `gpu`: the device's total and free bytes from the driver and this process's bytes from NVML (null with
   * a reason where NVML is missing or cannot say).
   *
   * Asynchronous because the procfs read makes the kernel walk every mapping of the process, which should not stall
   * the event loop of a server; it runs off the JS thread. The GPU figures are one driver call and one NVML call on
   * the JS thread (the first also loads NVML).
   *
   * @throws (rejects with) {@link DisposedError} after `dispose()`.
   * @example
   * ```ts
   * const { process, engine } = await engine.memory();
   * console.log(process?.pssBytes, engine.kvCache.blocksUsed, engine.components);
   * ```
   */
  async memory(): Promise<MemorySnapshot> {
    this.#checkLive('memory');
    let native: NativeMemory;
    try {
      native = this.#native.memory();
    } catch (err) {
      throw fromNativeError(err);
    }
    return takeSnapshot(native, this.device);
  }

  /**
   * Starts sampling memory every `intervalMs` (default 100 ms): this process's PSS and RSS, its GPU bytes (from
   * NVML; null on the CPU backend) and MemAvailable. `stop()` returns the peaks over the window, the peak fall of
   * MemAvailable below its value at the start, and when each happened. The timer does not keep the process alive;
   * {@link Engine.dispose} stops every tracker of the engine.
   *
   * @throws {@link InvalidOptionError} for bad options; {@link DisposedError} after `dispose()`.
   */
  trackMemory(options?: TrackMemoryOptions): MemoryTracker {
    this.#checkLive('trackMemory');
    const gpu = this.device === 'cuda' ? nvmlGpuSampler() : NO_GPU;
    const tracker = new MemoryTracker(options, { gpu, onStop: (t) => this.#trackers.delete(t) });
    if (!tracker.stopped) this.#trackers.add(tracker);
    return tracker;
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
    const form = inputForm(input);
    const params = validateGenerateOptions(withDefaults(this.generationDefaults, options), limits);
    const { stop, skipSpecialTokens } = validateTextOptions(options);
    if (form.form !== 'tokens' || stop.length > 0) this.#textLayer(form.form === 'tokens' ? 'generate() with stop strings' : 'generate()');
    const tokens = form.form === 'tokens' ? validateGenerateInput(input, limits) : this.#text!.promptIds(form, limits);
    params.stopTokenIds ??= [...this.modelInfo.eosTokenIds];
    const init: Omit<GenerationInit, 'requestAbort' | 'allowTokens' | 'readerPaused' | 'submittedAt'> = {
      promptTokens: tokens.length,
      logprobs: params.logprobs > 0,
      eosTokenIds: this.modelInfo.eosTokenIds,
      signal: options?.signal,
      startedAt,
      text: this.#text?.textOutput(stop, skipSpecialTokens),
      highWaterMark: validateHighWaterMark(options),
    };
    if (options?.signal?.aborted) {
      // Aborted before it started: the same outcome as any abort (an empty result), without touching the engine.
      const gen = new Generation({
        ...init,
        submittedAt: startedAt,
        requestAbort: () => {},
        allowTokens: () => {},
        readerPaused: () => {},
      });
      queueMicrotask(() => gen._abandon());
      return gen;
    }
    let id: number;
    try {
      // Held to the high-water mark from its first step: a loop taken in this tick keeps the bound however late
      // this thread gets to its first allowTokens (a stalled main thread once let the step thread run 600 ahead).
      id = this.#native.submit(tokens, { ...params, allowedTokens: init.highWaterMark });
    } catch (err) {
      throw fromNativeError(err);
    }
    const gen = new Generation({
      ...init,
      heldFromStart: true,
      submittedAt: performance.now(),
      requestAbort: () => this.#abort(id),
      allowTokens: (n) => this.#allowTokens(id, n),
      readerPaused: (paused) => this.#readerPaused(paused),
    });
    this.#live.set(id, gen);
    return gen;
  }

  /**
   * Scores a sequence under the model by teacher forcing: the logprob of every token given the ones before it,
   * computed in the engine's batch like any request. Takes the same inputs as {@link Engine.generate}: token ids,
   * a prompt (tokenized as `generate` would) or messages (rendered with the chat template); the sequence may be as
   * long as `maxContext`.
   *
   * @example
   * ```ts
   * const { meanNll, perplexity } = await engine.score({ tokens: ids });
   * ```
   * @throws {@link InvalidOptionError} for fewer than two tokens; {@link ContextOverflowError} when the sequence does
   * not fit `maxContext`; {@link AbortError} if the engine is disposed meanwhile.
   */
  async score(input: GenerateInput): Promise<ScoreResult> {
    this.#checkLive('score');
    // Scoring generates nothing, so the sequence may fill the context exactly.
    const limits = { maxContext: this.modelInfo.maxContext + 1, vocabSize: this.modelInfo.vocabSize };
    const form = inputForm(input);
    if (form.form !== 'tokens') this.#textLayer('score()');
    const tokens = form.form === 'tokens' ? validateGenerateInput(input, limits) : this.#text!.promptIds(form, limits);
    if (tokens.length < 2) throw new InvalidOptionError('score() needs at least two tokens: the first has nothing to predict it.');
    const params = { ...validateGenerateOptions({ maxTokens: 1, stopTokenIds: [] }, limits), promptLogprobs: true };
    let id: number;
    try {
      id = this.#native.submit(tokens, params);
    } catch (err) {
      throw fromNativeError(err);
    }
    const now = performance.now();
    const gen = new Generation({
      promptTokens: tokens.length, logprobs: false, eosTokenIds: [], startedAt: now, submittedAt: now,
      requestAbort: () => this.#abort(id), allowTokens: () => {}, highWaterMark: DEFAULT_HIGH_WATER_MARK,
      readerPaused: () => {},
    });
    this.#live.set(id, gen);
    const result = await gen;
    const logprobs = gen._promptLogprobs;
    if (result.finishReason === 'abort' || logprobs.length !== tokens.length - 1) {
      throw new AbortError('score() ended before the whole sequence was scored (the engine was disposed?).');
    }
    const meanNll = -logprobs.reduce((a, b) => a + b, 0) / logprobs.length;
    return { tokenIds: Array.from(tokens), logprobs, meanNll, perplexity: Math.exp(meanNll) };
  }

  /**
   * Token ids of `text`, with the checkpoint's tokenizer, exactly as the Hugging Face `tokenizers` library (and
   * transformers' `tokenizer(text, add_special_tokens=special)`) computes them.
   *
   * @param text - any string ('' gives no ids, or only the added special tokens).
   * @param options - `special` (default `true`): add the tokenizer's own special tokens (BOS for Llama/Mistral);
   * special-token strings inside `text` are matched as special tokens either way. See {@link TokenizeOptions}.
   * @throws {@link NoTokenizerError} when the checkpoint has no `tokenizer.json`; {@link InvalidOptionError} for a
   * non-string.
   *
   * @example
   * ```ts
   * const ids = engine.tokenize('Hello, world!'); // Qwen3: [9707, 11, 1879, 0]
   * ```
   */
  tokenize(text: string, options?: TokenizeOptions): number[] {
    const layer = this.#textLayer('tokenize');
    if (typeof text !== 'string') throw new InvalidOptionError(`tokenize() needs a string, got ${show(text)}.`);
    return layer.tokenize(text, booleanOption(options, 'special', 'tokenize') ?? true);
  }

  /**
   * The text of token ids. Decoding is plain: no clean-up of spaces before punctuation, so
   * `detokenize(tokenize(s, { special: false })) === s` for every string that the tokenizer does not normalize.
   * Ids the tokenizer does not know (rows of the embedding past its vocabulary) decode to nothing.
   *
   * @param ids - token ids.
   * @param options - `skipSpecial` (default `false`): leave special tokens out. See {@link DetokenizeOptions}.
   * @throws {@link NoTokenizerError} when the checkpoint has no `tokenizer.json`; {@link InvalidOptionError} for ids
   * that are not non-negative integers.
   */
  detokenize(ids: readonly number[], options?: DetokenizeOptions): string {
    const layer = this.#textLayer('detokenize');
    const checked = tokenIdsOption('ids', ids);
    return layer.detokenize(checked, booleanOption(options, 'skipSpecial', 'detokenize') ?? false);
  }

  /**
   * Renders a chat with the checkpoint's chat template (Jinja, from `tokenizer_config.json` or
   * `chat_template.jinja`), exactly as transformers' `apply_chat_template(messages, tokenize=False, ...)` does.
   *
   * @param messages - the conversation: `{ role, content }` objects.
   * @param options - `addGenerationPrompt` (default `false`) appends the header of an assistant turn; every other
   * field is a template variable, such as `enable_thinking: false` for Qwen3. See {@link ChatTemplateOptions}.
   * @throws {@link NoTokenizerError} without a tokenizer; {@link NoChatTemplateError} when the tokenizer has no chat
   * template; {@link InvalidOptionError} for malformed messages or when the template rejects them.
   *
   * @example
   * ```ts
   * const prompt = engine.applyChatTemplate(
   *   [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi!' }],
   *   { addGenerationPrompt: true, enable_thinking: false },
   * );
   * ```
   */
  applyChatTemplate(messages: readonly ChatMessage[], options?: ChatTemplateOptions): string {
    return this.#textLayer('applyChatTemplate').applyChatTemplate(messages, options);
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
    for (const tracker of [...this.#trackers]) tracker._end();
    try {
      await this.#native.dispose();
    } catch (err) {
      throw fromNativeError(err);
    } finally {
      // The native side ends each live request with an Abort event, delivered before the native dispose resolves
      // (binding/token_stream.h); whatever is left (a failed dispose) ends here, so every generation has settled.
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

  /** Backpressure: request `id` may generate `tokens` in all, then pauses until its reader allows more. */
  #allowTokens(id: number, tokens: number): void {
    if (!this.#disposed && this.#live.has(id)) this.#native.allowTokens(id, tokens);
  }

  /** A generation starts or stops waiting on its reader alone; the engine holds the process only for the others. */
  #readerPaused(paused: boolean): void {
    this.#pausedForReaders += paused ? 1 : -1;
    if (!this.#disposed) this.#native.setPausedRequests(this.#pausedForReaders);
  }

  #textLayer(method: string): TextLayer {
    this.#checkLive(method.replace(/\(.*$/, ''));
    if (!this.#text) {
      throw new NoTokenizerError(
        `${method} needs a tokenizer, and this checkpoint has no tokenizer.json. Copy the model's tokenizer.json ` +
          '(and tokenizer_config.json) into its folder, or give prompts as token ids ({ tokens }).',
      );
    }
    return this.#text;
  }

  #checkLive(method: string): void {
    if (this.#disposed) {
      throw new DisposedError(`Engine.${method}() was called after dispose(). Load a new engine with Engine.load().`);
    }
  }
}

/** An optional boolean field of an options object. */
function booleanOption(options: unknown, name: string, method: string): boolean | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError(`The options of ${method}() must be an object, got ${show(options)}.`);
  }
  const value = (options as Record<string, unknown>)[name];
  if (value !== undefined && typeof value !== 'boolean') {
    throw new InvalidOptionError(`Option "${name}" of ${method}() must be a boolean, got ${show(value)}.`);
  }
  return value as boolean | undefined;
}

/** The folder and options of `Engine.load(dir?, options?)` / `Engine.estimate(dir?, options?)`, checked. */
// The packaged default model only when no folder is passed at all (`load()`, `load(options)`): a folder argument
// that is undefined, null or '' is almost always an unset variable (`Engine.load(process.env.MODEL)`), and
// loading the toy model in its place would hide that.
function loadTarget(
  method: string,
  args: readonly unknown[],
): { dir: string; options: LoadOptions | undefined; params: NativeLoadParams } {
  const [first, second] = args;
  const optionsFirst = args.length === 0 || (typeof first === 'object' && first !== null);
  const dir = optionsFirst ? DEFAULT_MODEL_DIR : first;
  const options = (optionsFirst ? first : second) as LoadOptions | undefined;
  if (typeof dir !== 'string' || dir.length === 0) {
    const unset = dir === undefined || dir === null || dir === '';
    throw new InvalidOptionError(
      `Engine.${method} needs the path of a checkpoint folder (with config.json), got ${show(dir)}` +
        (unset
          ? `: an unset variable? Call Engine.${method}() without a folder for the packaged default model.`
          : '.'),
    );
  }
  const params = validateLoadOptions(options);
  return { dir, options, params };
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

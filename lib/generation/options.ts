/**
 * What `engine.generate()` takes — the input and the sampling options — and their validation into the native
 * request parameters.
 * @module
 */
import { ContextOverflowError, InvalidOptionError } from '../errors.js';
import type { NativeRequestParams } from '../native/addon.js';
import {
  INT32_MAX,
  integerOption,
  numberOption,
  optionsRecord,
  rejectUnknownKeys,
  show,
  signalOption,
  tokenIdsOption,
} from '../validation.js';

/** A prompt given as token ids, already tokenized for the loaded model. */
export interface TokensInput {
  /** The prompt's token ids: at least one, each a non-negative integer below the model's vocabulary size. */
  tokens: readonly number[];
}

/**
 * What to generate from. In this release a prompt is given as token ids ({@link TokensInput}); text prompts and
 * chat messages will join this union.
 */
export type GenerateInput = TokensInput;

/** Options of `engine.generate()`. Every field is optional; an unknown field is an error, so a typo is caught. */
export interface GenerateOptions {
  /** The most tokens to generate, at least 1. Default 256. */
  maxTokens?: number;
  /**
   * Sampling temperature, 0 or more. Default 0, which means greedy decoding (always the most likely token): this
   * release defaults to deterministic output; pass a positive temperature to sample.
   */
  temperature?: number;
  /** Sample only among the `topK` most likely tokens; 0 (the default) turns it off. */
  topK?: number;
  /** Nucleus sampling: sample among the most likely tokens whose probabilities add up to `topP`, in (0, 1]. Default 1 (off). */
  topP?: number;
  /** Drop tokens less likely than `minP` times the most likely one, in [0, 1]. Default 0 (off). */
  minP?: number;
  /** Seed of the sampler, an integer in [0, 2^53). Default: the engine draws one, so sampled output varies. */
  seed?: number;
  /** Report the sampled token's log-probability and this many most likely alternatives, 0 to 20. Default 0 (off). */
  logprobs?: number;
  /**
   * Token ids that end the generation (at most 16); the one sampled is the last id of the result. Default: the
   * model's end-of-sequence ids. `[]` turns stopping off, so only `maxTokens` and the context length end it.
   */
  stopTokenIds?: readonly number[];
  /** Aborting it ends the generation as `abort()` does: the result resolves with the tokens so far. */
  signal?: AbortSignal;
}

/** What the validators know of the loaded model; unknown limits are left to the native checks. @internal */
export interface ModelLimits {
  maxContext?: number;
  vocabSize?: number;
}

/** How many stop ids the native request carries (VT_MAX_STOP_IDS). */
const MAX_STOP_IDS = 16;
/** How many top alternatives the native engine reports at most (VT_MAX_TOP_LOGPROBS). */
const MAX_LOGPROBS = 20;

const KNOWN_KEYS: readonly (keyof GenerateOptions)[] = [
  'maxTokens',
  'temperature',
  'topK',
  'topP',
  'minP',
  'seed',
  'logprobs',
  'stopTokenIds',
  'signal',
];

/**
 * Checks the input of `generate()` and returns its prompt as the native engine takes it.
 * @throws InvalidOptionError for a malformed input; ContextOverflowError when the prompt leaves no room for a new
 * token in `limits.maxContext`.
 * @internal
 */
export function validateGenerateInput(input: unknown, limits: ModelLimits = {}): Int32Array {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new InvalidOptionError(`The input of generate() must be an object such as { tokens: [...] }, got ${show(input)}.`);
  }
  const record = input as Record<string, unknown>;
  if (!('tokens' in record)) {
    throw new InvalidOptionError('The input of generate() must have a "tokens" array of token ids (tokenize the prompt first).');
  }
  rejectUnknownKeys(record, ['tokens'], 'generate() input');
  const tokens = tokenIdsOption('tokens', record.tokens, limits.vocabSize);
  if (tokens.length === 0) throw new InvalidOptionError('Option "tokens" must hold at least one token id, got [].');
  if (limits.maxContext !== undefined && tokens.length >= limits.maxContext) {
    throw new ContextOverflowError(
      `The prompt has ${tokens.length} tokens, which leaves no room for a new token in this engine's context of ` +
        `${limits.maxContext} tokens. Shorten the prompt, or load the engine with a larger maxContext.`,
    );
  }
  return Int32Array.from(tokens);
}

/**
 * Checks the options of `generate()` and maps them to the native request parameters, with the defaults filled in.
 * `signal` is checked here but does not travel in the result.
 * @throws InvalidOptionError naming the option, the value and the allowed range.
 * @internal
 */
export function validateGenerateOptions(options: unknown, limits: ModelLimits = {}): NativeRequestParams {
  const o = optionsRecord(options, 'generate() options');
  rejectUnknownKeys(o, KNOWN_KEYS, 'generate()');
  signalOption('signal', o.signal);
  const params: NativeRequestParams = {
    maxTokens: integerOption('maxTokens', o.maxTokens, 1, INT32_MAX) ?? 256,
    temperature: numberOption('temperature', o.temperature, 'of 0 or more (0 = greedy)', (n) => n >= 0) ?? 0,
    topK: integerOption('topK', o.topK, 0, INT32_MAX) ?? 0,
    topP: numberOption('topP', o.topP, 'in (0, 1] (1 = off)', (n) => n > 0 && n <= 1) ?? 1,
    minP: numberOption('minP', o.minP, 'in [0, 1] (0 = off)', (n) => n >= 0 && n <= 1) ?? 0,
    logprobs: integerOption('logprobs', o.logprobs, 0, MAX_LOGPROBS) ?? 0,
  };
  const seed = integerOption('seed', o.seed, 0, Number.MAX_SAFE_INTEGER);
  if (seed !== undefined) params.seed = seed;
  if (o.stopTokenIds !== undefined) {
    const stop = tokenIdsOption('stopTokenIds', o.stopTokenIds, limits.vocabSize);
    if (stop.length > MAX_STOP_IDS) {
      throw new InvalidOptionError(`Option "stopTokenIds" may hold at most ${MAX_STOP_IDS} token ids, got ${stop.length}.`);
    }
    params.stopTokenIds = [...stop];
  }
  return params;
}

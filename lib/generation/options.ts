/**
 * What `engine.generate()` takes — the input and the sampling options — and their validation into the native
 * request parameters.
 * @module
 */
import type { ChatMessage } from '../chat/template.js';
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
 * A prompt given as text. It is tokenized as `engine.tokenize(prompt)` does, with the tokenizer's special tokens
 * added (the BOS of Llama and Mistral), as transformers' `tokenizer(prompt)` does.
 */
export interface PromptInput {
  /** The prompt text, used as it is (no chat template). */
  prompt: string;
}

/**
 * A chat: the messages are rendered with the checkpoint's chat template (`engine.applyChatTemplate(messages,
 * { addGenerationPrompt: true, ...templateVars })`) and the result is tokenized without adding special tokens
 * again, as transformers' `apply_chat_template(messages, add_generation_prompt=True, tokenize=True)` does.
 */
export interface MessagesInput {
  /** The conversation so far; the model writes the next assistant turn. */
  messages: readonly ChatMessage[];
  /** Extra variables for the chat template, such as `{ enable_thinking: false }` for Qwen3. */
  templateVars?: Readonly<Record<string, unknown>>;
}

/**
 * What to generate from: token ids ({@link TokensInput}), text ({@link PromptInput}) or a chat
 * ({@link MessagesInput}). Text and chats need a checkpoint with a tokenizer (`tokenizer.json`).
 */
export type GenerateInput = TokensInput | PromptInput | MessagesInput;

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
  /**
   * Strings that end the generation when its text reaches one of them (at most 16, none empty). The text stops
   * right before the stop string, which is never emitted, even in part: text that could be the start of one is
   * held back until it is known not to be. The result's `finishReason` is `'stop'`; its `tokenIds` run up to the
   * token that completed the stop string. Needs a tokenizer.
   */
  stop?: readonly string[];
  /**
   * Whether the generated text leaves special tokens out (as `detokenize(ids, { skipSpecial: true })`). Default
   * `true`. Only the text is affected: `tokenIds` always holds every id.
   */
  skipSpecialTokens?: boolean;
  /**
   * Divides positive logits (multiplies negative ones) of every token already in the prompt or the output by this
   * factor, as transformers' `repetition_penalty`: above 1 discourages repeats. Greater than 0; default 1 (off).
   */
  repetitionPenalty?: number;
  /**
   * Subtracted once from the logit of every token already generated (OpenAI's `presence_penalty`): positive values
   * push towards new tokens. A finite number; default 0 (off).
   */
  presencePenalty?: number;
  /**
   * Subtracted from the logit of every token already generated, times the number of times it was generated
   * (OpenAI's `frequency_penalty`). A finite number; default 0 (off).
   */
  frequencyPenalty?: number;
  /**
   * Added to the logits of the given token ids before sampling (OpenAI's `logit_bias`), such as
   * `{ 151645: -100 }` to make a token (almost) impossible. Keys are token ids of the model's vocabulary; values
   * are finite numbers, or `-Infinity` to ban a token outright.
   */
  logitBias?: Readonly<Record<number, number>>;
  /** Aborting it ends the generation as `abort()` does: the result resolves with the tokens so far. */
  signal?: AbortSignal;
  /**
   * Backpressure: how many tokens the engine may generate ahead of the generation's iterator (a `for await` loop,
   * or a stream made from it), an integer of 1 or more. Default 256. When that many wait unread, the request pauses
   * in the engine, which goes on with the other requests at full speed; it resumes once the reader has taken all
   * but a quarter of them. So a reader that stops reading holds at most `highWaterMark` unread chunks in memory
   * (one token each, plus the last, text-only chunk some generations end with). The pace is the iterator's from
   * the request's first step when the iterator is taken in the tick that called `generate()` (as `for await` on it
   * does), else from the moment it is taken; a generation that is awaited, or followed through `'token'` events, is
   * never paused.
   */
  highWaterMark?: number;
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
/** How many stop strings a generation may have. */
const MAX_STOP_STRINGS = 16;
/** The default of `highWaterMark`: tokens the engine may generate ahead of a generation's iterator. */
export const DEFAULT_HIGH_WATER_MARK = 256;

const KNOWN_KEYS: readonly (keyof GenerateOptions)[] = [
  'maxTokens',
  'temperature',
  'topK',
  'topP',
  'minP',
  'seed',
  'logprobs',
  'stopTokenIds',
  'stop',
  'skipSpecialTokens',
  'repetitionPenalty',
  'presencePenalty',
  'frequencyPenalty',
  'logitBias',
  'signal',
  'highWaterMark',
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
  validateHighWaterMark(o);
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
  const repetitionPenalty = numberOption('repetitionPenalty', o.repetitionPenalty, 'greater than 0 (1 = off)', (n) => n > 0);
  if (repetitionPenalty !== undefined) params.repetitionPenalty = repetitionPenalty;
  const presencePenalty = numberOption('presencePenalty', o.presencePenalty, '(finite; 0 = off)', () => true);
  if (presencePenalty !== undefined) params.presencePenalty = presencePenalty;
  const frequencyPenalty = numberOption('frequencyPenalty', o.frequencyPenalty, '(finite; 0 = off)', () => true);
  if (frequencyPenalty !== undefined) params.frequencyPenalty = frequencyPenalty;
  if (o.logitBias !== undefined) params.logitBias = logitBiasOption(o.logitBias, limits.vocabSize);
  return params;
}

/**
 * The text options of `generate()` (they act in TS, not in the native request): stop strings and whether the text
 * skips special tokens.
 * @throws InvalidOptionError naming the option.
 * @internal
 */
export function validateTextOptions(options: unknown): { stop: string[]; skipSpecialTokens: boolean } {
  const o = optionsRecord(options, 'generate() options');
  const skip = o.skipSpecialTokens;
  if (skip !== undefined && typeof skip !== 'boolean') {
    throw new InvalidOptionError(`Option "skipSpecialTokens" must be a boolean, got ${show(skip)}.`);
  }
  const stop = o.stop;
  if (stop !== undefined) {
    if (!Array.isArray(stop) || stop.length > MAX_STOP_STRINGS) {
      throw new InvalidOptionError(`Option "stop" must be an array of at most ${MAX_STOP_STRINGS} strings, got ${show(stop)}.`);
    }
    stop.forEach((s: unknown, i) => {
      if (typeof s !== 'string' || s.length === 0) {
        throw new InvalidOptionError(`Option "stop" must hold non-empty strings; stop[${i}] is ${show(s)}.`);
      }
    });
  }
  return { stop: stop === undefined ? [] : [...(stop as string[])], skipSpecialTokens: skip ?? true };
}

/**
 * The `highWaterMark` of `generate()` (it acts in TS, on the generation's iterator), with its default.
 * @throws InvalidOptionError unless it is an integer from 1 to 2^31 - 1.
 * @internal
 */
export function validateHighWaterMark(options: unknown): number {
  const o = optionsRecord(options, 'generate() options');
  return integerOption('highWaterMark', o.highWaterMark, 1, INT32_MAX) ?? DEFAULT_HIGH_WATER_MARK;
}

/** logitBias as the native [id, bias] pairs, in ascending id order. */
function logitBiasOption(value: unknown, vocabSize: number | undefined): Array<[number, number]> {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || value instanceof Map) {
    throw new InvalidOptionError(`Option "logitBias" must be an object of token id → bias, such as { 42: -100 }, got ${show(value)}.`);
  }
  const limit = vocabSize ?? INT32_MAX + 1;
  const pairs: Array<[number, number]> = [];
  for (const [key, bias] of Object.entries(value as Record<string, unknown>)) {
    const id = /^(0|[1-9][0-9]*)$/.test(key) ? Number(key) : Number.NaN;
    if (!Number.isSafeInteger(id) || id >= limit) {
      const allowed = vocabSize === undefined ? 'a non-negative integer' : `an integer from 0 to ${vocabSize - 1} (the model's vocabulary)`;
      throw new InvalidOptionError(`Option "logitBias" has the key ${show(key)}; keys must be token ids, ${allowed}.`);
    }
    if (typeof bias !== 'number' || !(Number.isFinite(bias) || bias === Number.NEGATIVE_INFINITY)) {
      throw new InvalidOptionError(
        `Option "logitBias" maps token ${id} to ${show(bias)}; biases must be finite numbers (or -Infinity, which bans the token).`,
      );
    }
    pairs.push([id, bias]);
  }
  return pairs.sort((a, b) => a[0] - b[0]);
}

/** The form of a `generate()` input, checked only as far as telling the forms apart. @internal */
export type InputForm =
  | { form: 'tokens' }
  | { form: 'prompt'; prompt: string }
  | { form: 'messages'; messages: unknown; templateVars: Record<string, unknown> };

/**
 * Tells which form of {@link GenerateInput} `input` is, and checks the text forms' fields.
 * @throws InvalidOptionError for an input of no known form.
 * @internal
 */
export function inputForm(input: unknown): InputForm {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new InvalidOptionError(
      `The input of generate() must be an object: { prompt: 'text' }, { messages: [...] } or { tokens: [...] }, got ${show(input)}.`,
    );
  }
  const record = input as Record<string, unknown>;
  if ('tokens' in record) return { form: 'tokens' };
  if ('prompt' in record) {
    rejectUnknownKeys(record, ['prompt'], 'generate() input');
    if (typeof record.prompt !== 'string') {
      throw new InvalidOptionError(`Option "prompt" must be a string, got ${show(record.prompt)}.`);
    }
    return { form: 'prompt', prompt: record.prompt };
  }
  if ('messages' in record) {
    rejectUnknownKeys(record, ['messages', 'templateVars'], 'generate() input');
    const vars = optionsRecord(record.templateVars, 'Option "templateVars"');
    if ('addGenerationPrompt' in vars || 'add_generation_prompt' in vars) {
      throw new InvalidOptionError('Option "templateVars" cannot set the generation prompt: generate() always adds it.');
    }
    return { form: 'messages', messages: record.messages, templateVars: vars };
  }
  throw new InvalidOptionError(
    'The input of generate() must have "prompt" (text), "messages" (a chat) or "tokens" (token ids), got an object ' +
      `with ${Object.keys(record).length ? Object.keys(record).map(show).join(', ') : 'no keys'}.`,
  );
}

/**
 * Checks the token ids a text input tokenized to: at least one, with room for a new token in the context.
 * @internal
 */
export function checkPromptIds(ids: readonly number[], limits: ModelLimits, what: string): Int32Array {
  if (ids.length === 0) throw new InvalidOptionError(`The ${what} tokenized to no tokens: give a non-empty prompt.`);
  return validateGenerateInput({ tokens: ids }, limits);
}

/**
 * What a generation yields as it runs (chunks) and what it settles with (the result).
 * @module
 */

/** A log-probability of one alternative token. */
export interface TopLogprob {
  /** The alternative's token id. */
  tokenId: number;
  /** Its natural-log probability under the distribution the token was sampled from. */
  logprob: number;
}

/** The log-probability of a generated token, with the most likely alternatives (when `logprobs` was asked for). */
export interface TokenLogprob {
  /** The generated token's id. */
  tokenId: number;
  /** Its natural-log probability. */
  logprob: number;
  /** The `logprobs` most likely tokens at that position, most likely first. */
  top: TopLogprob[];
}

/** The tokens one engine step produced for a generation: usually one. */
export interface GenerationChunk {
  /**
   * The new token ids, in order. Empty only in a generation's last chunk when that chunk only carries text held
   * back until the end.
   */
  tokenIds: number[];
  /**
   * The text that became final with this chunk; present when the engine has a tokenizer. It may be `''`: text is
   * held back while a character is incomplete (one emoji or CJK character can span several byte-level tokens) and
   * while it could be the start of a `stop` string. The chunks' texts add up to the result's `text`.
   */
  text?: string;
  /** One entry per id of `tokenIds`; present only when the generation was started with `logprobs`. */
  logprobs?: TokenLogprob[];
}

/**
 * Why a generation ended:
 * - `'eos'`: the model produced one of its end-of-sequence ids;
 * - `'stop'`: it produced one of the `stopTokenIds` given that is not an end-of-sequence id, or its text reached
 *   one of the `stop` strings;
 * - `'length'`: `maxTokens` were generated, or the context is full;
 * - `'abort'`: it was aborted (`abort()`, its `signal`, leaving a `for await` loop early, or `engine.dispose()`).
 */
export type FinishReason = 'eos' | 'length' | 'stop' | 'abort';

/** Token counts of a generation. */
export interface GenerationUsage {
  /** Tokens of the prompt. */
  promptTokens: number;
  /** Tokens generated. */
  completionTokens: number;
}

/** Where the time of a generation went, in milliseconds, measured on the JS thread. */
export interface GenerationTimings {
  /** From the `generate()` call to the request's submission to the engine (validation, and later tokenization). */
  queuedMs: number;
  /** From submission to the first token: waiting for a slot in the batch, then the prompt's prefill. */
  prefillMs: number;
  /** From the first token to the last. */
  decodeMs: number;
  /** From the `generate()` call to the end. */
  totalMs: number;
  /** Decode speed: the tokens after the first per second of `decodeMs`; 0 with fewer than two tokens. */
  tokensPerSecond: number;
}

/** What a generation settles with: `await engine.generate(...)`. */
export interface GenerationResult {
  /**
   * Every generated token id, in order. A stop or end-of-sequence id that ended the generation is the last one;
   * after a `stop` string, the ids run up to the token that completed it.
   */
  tokenIds: number[];
  /**
   * The generated text; present when the engine has a tokenizer. It is the ids decoded (special tokens left out
   * unless `skipSpecialTokens: false`) without the id that ended the generation, and cut before the first `stop`
   * string.
   */
  text?: string;
  /** Why it ended. */
  finishReason: FinishReason;
  /** Token counts. */
  usage: GenerationUsage;
  /** One entry per id of `tokenIds`; present only when the generation was started with `logprobs`. */
  logprobs?: TokenLogprob[];
  /** Where the time went. */
  timings: GenerationTimings;
}

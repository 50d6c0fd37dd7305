/**
 * Log-probabilities in the OpenAI shapes: chat's `logprobs.content` list and the completions API's parallel arrays.
 * @internal
 * @module
 */
import type { Engine } from '../engine/engine.js';
import type { TokenLogprob } from '../generation/result.js';

/** One token of chat's `logprobs.content`. @internal */
export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
}

/** The completions API's `logprobs` of one choice (or of one streamed chunk). @internal */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>>;
  text_offset: number[];
}

/**
 * The text of single tokens, for logprobs. A token that is part of a character (a byte of an emoji) has no text of
 * its own and reads as U+FFFD, as in other servers. Texts are cached: a server sees the same tokens again and again.
 * @internal
 */
export class TokenTexts {
  readonly #engine: Engine;
  readonly #cache = new Map<number, string>();

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** The token's text, special tokens included; `token_id:<id>` when the checkpoint has no tokenizer. */
  text(id: number): string {
    let text = this.#cache.get(id);
    if (text === undefined) {
      try {
        text = this.#engine.detokenize([id]);
      } catch {
        text = `token_id:${id}`;
      }
      this.#cache.set(id, text);
    }
    return text;
  }

  /** Chat's `logprobs.content` entries, with `top` alternatives each (0 for none). */
  chat(logprobs: readonly TokenLogprob[], top: number): ChatTokenLogprob[] {
    return logprobs.map((lp) => ({
      ...this.#entry(lp.tokenId, lp.logprob),
      top_logprobs: lp.top.slice(0, top).map((alt) => this.#entry(alt.tokenId, alt.logprob)),
    }));
  }

  /**
   * The completions API's arrays, with `top` alternatives each; `offset` is where the first token's text starts in
   * the choice's text, and `end` where the next one would.
   */
  completion(logprobs: readonly TokenLogprob[], top: number, offset: number): { logprobs: CompletionLogprobs; end: number } {
    const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let at = offset;
    for (const lp of logprobs) {
      const token = this.text(lp.tokenId);
      out.tokens.push(token);
      out.token_logprobs.push(lp.logprob);
      out.top_logprobs.push(Object.fromEntries(lp.top.slice(0, top).map((alt) => [this.text(alt.tokenId), alt.logprob])));
      out.text_offset.push(at);
      at += token.length;
    }
    return { logprobs: out, end: at };
  }

  #entry(id: number, logprob: number): { token: string; logprob: number; bytes: number[] } {
    const token = this.text(id);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  }
}

/**
 * The logprobs to report: all but an end-of-sequence token, which ends the generation without adding text (the
 * OpenAI API reports no entry for it either).
 * @internal
 */
export function reportedLogprobs(logprobs: readonly TokenLogprob[] | undefined, eosTokenIds: readonly number[]): TokenLogprob[] {
  return (logprobs ?? []).filter((lp) => !eosTokenIds.includes(lp.tokenId));
}

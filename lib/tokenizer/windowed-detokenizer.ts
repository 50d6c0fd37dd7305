/**
 * Streaming detokenization for any tokenizer, by decoding a window of ids again at each push.
 * @module
 */
import type { TextTokenizer } from './tokenizer.js';

/** How many already-emitted tokens to decode again before the new ones, so word-initial spaces come out right. */
const CONTEXT_TOKENS = 4;

/**
 * The general path of {@link StreamDetokenizer}, for decoders whose output for a token depends on its neighbours
 * (Metaspace's leading space, ByteFallback's byte runs, WordPiece's `##`).
 *
 * Byte-level and byte-fallback tokenizers split one character over several tokens; decoding such a prefix yields
 * U+FFFD. So each push decodes a window (a few emitted tokens for context, then the pending ones), and emits the
 * part after the context's text only when it does not end in U+FFFD; otherwise the pending tokens wait for the
 * next push. `finish()` emits what is left as it decodes (a sequence that never completes stays U+FFFD, as in the
 * whole decode). Decoding only a window keeps each push O(window), not O(length), but it is two library decodes per
 * push (some 7 µs a token on a 2-core VM).
 * @internal
 */
export class WindowedDetokenizer {
  readonly #tokenizer: TextTokenizer;
  readonly #skipSpecial: boolean;
  readonly #ids: number[] = [];
  /** Start of the context window, and start of the ids whose text has not been emitted. */
  #prefix = 0;
  #read = 0;

  constructor(tokenizer: TextTokenizer, skipSpecial: boolean) {
    this.#tokenizer = tokenizer;
    this.#skipSpecial = skipSpecial;
  }

  /** Adds ids; returns the text that became final ('' while a character is still incomplete). */
  push(ids: readonly number[]): string {
    for (const id of ids) this.#ids.push(id);
    return this.#emit(false);
  }

  /** Returns the text still held back, as decoding the whole would render it. */
  finish(): string {
    return this.#emit(true);
  }

  #emit(final: boolean): string {
    if (this.#read === this.#ids.length) return '';
    const context = this.#decode(this.#prefix, this.#read);
    const all = this.#decode(this.#prefix, this.#ids.length);
    // A decoder may only add text when tokens are appended; if the window's text does not extend the context's,
    // something re-rendered the boundary (never seen with the tokenizers tested): wait for more tokens.
    if (!all.startsWith(context) && !final) return '';
    if (!final && (all.length === context.length || all.endsWith('\uFFFD'))) return '';
    const text = all.startsWith(context) ? all.slice(context.length) : all;
    this.#read = this.#ids.length;
    this.#prefix = Math.max(0, this.#read - CONTEXT_TOKENS);
    return text;
  }

  #decode(from: number, to: number): string {
    return from >= to ? '' : this.#tokenizer.decode(this.#ids.slice(from, to), this.#skipSpecial);
  }
}

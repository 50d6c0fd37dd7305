/**
 * Streaming detokenization: text of a growing list of token ids, emitted only once it is final.
 * @module
 */
import { ByteLevelDetokenizer } from './byte-level-detokenizer.js';
import type { TextTokenizer } from './tokenizer.js';
import { WindowedDetokenizer } from './windowed-detokenizer.js';

/** Which way a {@link StreamDetokenizer} makes text: per-id table (byte-level tokenizers) or re-decoded windows. */
export type DetokenizerPath = 'byte-level' | 'windowed';

/**
 * Turns token ids, pushed one step at a time, into text pieces whose concatenation is exactly
 * `tokenizer.decode(allIds)`, none ending inside a character. A tokenizer with a plain ByteLevel decoder takes the
 * byte-level path ({@link ByteLevelDetokenizer}: a table look-up per token); any other takes the windowed path
 * ({@link WindowedDetokenizer}: two library decodes per push). The tokenizer decides once, for all its streams
 * (`TextTokenizer.byteLevelTable()`).
 * @internal
 */
export class StreamDetokenizer {
  readonly path: DetokenizerPath;
  readonly #impl: ByteLevelDetokenizer | WindowedDetokenizer;

  constructor(tokenizer: TextTokenizer, skipSpecial: boolean) {
    const table = tokenizer.byteLevelTable();
    this.path = table ? 'byte-level' : 'windowed';
    this.#impl = table ? new ByteLevelDetokenizer(table, skipSpecial) : new WindowedDetokenizer(tokenizer, skipSpecial);
  }

  /** Adds ids; returns the text that became final ('' while a character is still incomplete). */
  push(ids: readonly number[]): string {
    return this.#impl.push(ids);
  }

  /** Returns the text still held back, as decoding the whole would render it. */
  finish(): string {
    return this.#impl.finish();
  }
}

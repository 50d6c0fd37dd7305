/**
 * Streaming detokenization for byte-level tokenizers in O(1) per token: a table look-up, and a streaming UTF-8
 * decoder only for the tokens that split a character.
 * @module
 */
import { ADDED, BYTES, type ByteLevelTable, EMPTY, SPECIAL, TEXT } from './byte-level-table.js';

const STREAM = { stream: true } as const;

/**
 * The text of pushed ids, equal piece by piece in total to the tokenizer library's decode of them all. That decode
 * (ByteLevel decoder) joins the bytes of each run of vocabulary tokens and decodes the run with a non-fatal
 * TextDecoder (an incomplete or invalid sequence becomes U+FFFD the WHATWG way), and writes each added token's
 * content between runs; special tokens left out by `skipSpecial` are removed before, so they do not cut a run.
 * Here a streaming TextDecoder holds the bytes of an unfinished character across pushes; an added token and the
 * end flush it, exactly where a run ends in the whole decode.
 * @internal
 */
export class ByteLevelDetokenizer {
  readonly #table: ByteLevelTable;
  readonly #skipSpecial: boolean;
  readonly #utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  /** Whether bytes went into #utf8 since its last flush (it may hold part of a character). */
  #open = false;

  constructor(table: ByteLevelTable, skipSpecial: boolean) {
    this.#table = table;
    this.#skipSpecial = skipSpecial;
  }

  /** Adds ids; returns the text they complete (a character split over tokens comes out with its last byte). */
  push(ids: readonly number[]): string {
    const { size, kinds, pieces } = this.#table;
    let text = '';
    for (const id of ids) {
      if (!(id < size)) continue; // past the vocabulary: nothing, as TextTokenizer.decode drops them
      const i = id >>> 0 === id ? id : size; // a negative id is the unknown token in the library's decode
      switch (kinds[i]) {
        case EMPTY:
          break;
        case TEXT:
          // Its first byte ends whatever is pending (with one U+FFFD) just as a flush does.
          text += this.#flush() + (pieces[i] as string);
          break;
        case BYTES:
          text += this.#utf8.decode(pieces[i] as Uint8Array, STREAM);
          this.#open = true;
          break;
        case SPECIAL:
          if (!this.#skipSpecial) text += this.#flush() + (pieces[i] as string);
          break; // skipped, it is not there at all: the bytes on both sides make one run
        case ADDED:
          text += this.#flush() + (pieces[i] as string);
          break;
      }
    }
    return text;
  }

  /** Returns what the decoder still holds: one U+FFFD for an unfinished character, as the whole decode renders it. */
  finish(): string {
    return this.#flush();
  }

  #flush(): string {
    if (!this.#open) return '';
    this.#open = false;
    return this.#utf8.decode();
  }
}

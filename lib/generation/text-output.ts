/**
 * The text side of a generation: generated ids → final text pieces, cut at the first stop string.
 * @module
 */
import { StreamDetokenizer } from '../tokenizer/detokenizer.js';
import type { TextTokenizer } from '../tokenizer/tokenizer.js';
import { StopStringMatcher } from './stop-strings.js';

/**
 * Feeds each generated id through a {@link StreamDetokenizer} (so no piece ends inside a character) and a
 * {@link StopStringMatcher} (so no piece holds a stop string or the start of one). The pieces it returns add up to
 * the generation's text: the decoded ids (special tokens left out when `skipSpecial`), cut before the first stop
 * string.
 * @internal
 */
export class TextOutput {
  readonly #detokenizer: StreamDetokenizer;
  readonly #stops: StopStringMatcher;
  #text = '';

  constructor(tokenizer: TextTokenizer, stop: readonly string[], skipSpecial: boolean) {
    this.#detokenizer = new StreamDetokenizer(tokenizer, skipSpecial);
    this.#stops = new StopStringMatcher(stop);
  }

  /** The text emitted so far. */
  get text(): string {
    return this.#text;
  }

  /** Whether a stop string was found: the generation must end. */
  get stopped(): boolean {
    return this.#stops.stopped;
  }

  /** Adds generated ids; returns the text that became final. */
  push(ids: readonly number[]): string {
    if (this.#stops.stopped) return '';
    return this.#take(this.#stops.push(this.#detokenizer.push(ids)).text);
  }

  /** The generation ended: returns everything still held back. */
  finish(): string {
    if (this.#stops.stopped) return '';
    const tail = this.#stops.push(this.#detokenizer.finish()).text;
    return this.#take(tail + this.#stops.finish());
  }

  #take(text: string): string {
    this.#text += text;
    return text;
  }
}

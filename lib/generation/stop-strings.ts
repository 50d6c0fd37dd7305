/**
 * Stop strings over streamed text: find the first occurrence of any of them, and never emit text that could turn
 * out to be the start of one.
 * @module
 */

/** What {@link StopStringMatcher.push} returns. @internal */
export interface StopMatch {
  /** Text that is final and before any stop string. */
  text: string;
  /** Whether a stop string was found; `text` then ends right before it, and nothing more is emitted. */
  stopped: boolean;
}

/**
 * Holds back the longest tail of the text that is a prefix of a stop string, so a stop string split over several
 * chunks (or tokens) is still found and never emitted in part.
 * @internal
 */
export class StopStringMatcher {
  readonly #stops: readonly string[];
  #held = '';
  #stopped = false;

  constructor(stops: readonly string[]) {
    this.#stops = stops;
  }

  /** Whether a stop string was found. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Adds text; returns what can be emitted now. */
  push(piece: string): StopMatch {
    if (this.#stopped) return { text: '', stopped: true };
    const text = this.#held + piece;
    if (this.#stops.length === 0) {
      this.#held = '';
      return { text, stopped: false };
    }
    // The earliest stop string wins; among those starting at the same place, any (the text ends there).
    let at = -1;
    for (const stop of this.#stops) {
      const i = text.indexOf(stop);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      this.#stopped = true;
      this.#held = '';
      return { text: text.slice(0, at), stopped: true };
    }
    const keep = this.#partialTail(text);
    this.#held = text.slice(text.length - keep);
    return { text: text.slice(0, text.length - keep), stopped: false };
  }

  /** Returns the held-back text (the generation ended without completing a stop string). */
  finish(): string {
    const text = this.#stopped ? '' : this.#held;
    this.#held = '';
    return text;
  }

  /** The length of the longest suffix of `text` that is a proper prefix of some stop string. */
  #partialTail(text: string): number {
    let best = 0;
    for (const stop of this.#stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > best; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}

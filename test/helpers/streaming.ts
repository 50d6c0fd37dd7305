// What the streaming detokenization tests share: pushing ids through a StreamDetokenizer, the check that a piece
// does not end inside a character, and a seeded random source.
import { StreamDetokenizer } from '../../lib/tokenizer/detokenizer.js';
import type { TextTokenizer } from '../../lib/tokenizer/tokenizer.js';

/** Pushes ids one at a time (or in the given step sizes, cycled) and returns the pieces, the last from finish(). */
export function streamPieces(tok: TextTokenizer, ids: readonly number[], skipSpecial = false, steps: readonly number[] = [1]): string[] {
  const d = new StreamDetokenizer(tok, skipSpecial);
  const pieces: string[] = [];
  for (let i = 0, k = 0; i < ids.length; k++) {
    const n = steps[k % steps.length];
    pieces.push(d.push(ids.slice(i, i + n)));
    i += n;
  }
  pieces.push(d.finish());
  return pieces;
}

/** A lone surrogate: half of a character, what a broken UTF-16 cut would leave. */
export const brokenSurrogate = (s: string) => /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);

/** A seeded uniform [0, 1) source (an LCG), so a failing case can be replayed. */
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

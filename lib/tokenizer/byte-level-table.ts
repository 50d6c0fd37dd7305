/**
 * What each token id of a byte-level tokenizer (GPT-2's byte-to-unicode alphabet: Qwen2/3, cl100k, Llama 3) adds
 * to decoded text, computed once per tokenizer so that streaming it costs a table look-up per token
 * (`byte-level-detokenizer.ts`).
 * @module
 */

/** An id that adds nothing and leaves the UTF-8 stream as it is (a hole in the vocabulary, an empty token). */
export const EMPTY = 0;
/** An id whose bytes start a character and end one: from a clean UTF-8 state, they decode to `pieces[id]`. */
export const TEXT = 1;
/** An id whose bytes must go through the streaming UTF-8 decoder (part of a character, or invalid ones). */
export const BYTES = 2;
/** An added token: its content, verbatim, after the pending UTF-8 bytes are flushed. */
export const ADDED = 3;
/** An added token marked special: as ADDED, or nothing at all when special tokens are skipped. */
export const SPECIAL = 4;

/**
 * Per id: its kind (one of the constants above) and its piece (the text of TEXT, ADDED and SPECIAL ids, the bytes of
 * BYTES ids). Index `size` holds the entry of the ids the library renders as its unknown token (negative ids).
 */
export interface ByteLevelTable {
  readonly size: number;
  readonly kinds: Uint8Array;
  readonly pieces: ReadonlyArray<string | Uint8Array | undefined>;
}

/** What the table is computed from: the tokenizer library's view of each id. */
export interface ByteLevelSource {
  /** Ids are 0 to size - 1 (larger ones decode to nothing). */
  size: number;
  /** The token string of an id as the library's `decode` looks it up (`model.vocab[id]`), undefined for a hole. */
  tokenOf(id: number): string | null | undefined;
  /** What the library's `decode` puts in a hole's place (`model.unk_token`; null for most byte-level BPEs). */
  unkToken: string | null | undefined;
  /** The contents of every added token: the ByteLevel decoder writes them out as they are, not as bytes. */
  addedContents: ReadonlySet<string>;
  /** Ids that `skipSpecial` leaves out. */
  specialIds: ReadonlySet<number>;
}

/**
 * Above this many ids the table is not built (the windowed path is used): tokenizer.json may give an added token an
 * id near 2^32, and real vocabularies stay far below it (Qwen3: 151,669; cl100k: 100,277; Gemma 3: 262,144).
 */
export const MAX_TABLE_IDS = 1 << 20;

/** GPT-2's byte-to-unicode alphabet, reversed: code point → byte, -1 outside it. */
const CHAR_TO_BYTE: Int16Array = (() => {
  // Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) take the
  // code points from 256 up, in byte order.
  const table = new Int16Array(256 + 68).fill(-1);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table[printable ? b : next++] = b;
  }
  return table;
})();

const isContinuation = (b: number): boolean => b >= 0x80 && b <= 0xbf;

/**
 * Writes the bytes of a vocabulary token into `out` as the library's ByteLevel decoder makes them: each code point
 * through the alphabet, and one outside it becomes byte 0 (the library writes `undefined` into a Uint8Array).
 * Returns how many, or -1 when the token holds a lone surrogate: the library joins a run's tokens before splitting
 * code points, so two halves in adjacent tokens would make one code point there, which per-token bytes cannot
 * reproduce.
 */
function tokenBytes(token: string, out: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < token.length; i++) {
    const unit = token.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdfff) {
      const low = token.charCodeAt(i + 1); // NaN past the end
      if (unit > 0xdbff || !(low >= 0xdc00 && low <= 0xdfff)) return -1;
      i++; // a whole astral code point: outside the alphabet
      out[n++] = 0;
    } else {
      out[n++] = unit < CHAR_TO_BYTE.length ? Math.max(CHAR_TO_BYTE[unit], 0) : 0;
    }
  }
  return n;
}

/**
 * Computes the table, or undefined where per-id pieces cannot reproduce the library's decode exactly (too many ids,
 * a lone surrogate in a token, a special id that is not an added token): the caller then keeps the windowed path.
 */
export function buildByteLevelTable(source: ByteLevelSource): ByteLevelTable | undefined {
  const { size } = source;
  if (size > MAX_TABLE_IDS) return undefined;
  const kinds = new Uint8Array(size + 1);
  const pieces: Array<string | Uint8Array | undefined> = [];
  // The same options as the library's ByteLevel decoder: ignoreBOM keeps a leading U+FEFF, as it does.
  const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  let scratch = new Uint8Array(256);
  for (let id = 0; id <= size; id++) {
    const token = id < size ? (source.tokenOf(id) ?? source.unkToken) : source.unkToken;
    const special = id < size && source.specialIds.has(id);
    if (token !== null && token !== undefined && source.addedContents.has(token)) {
      kinds[id] = special ? SPECIAL : ADDED;
      pieces.push(token);
      continue;
    }
    if (special) return undefined; // special ids are added tokens' ids, so their token is an added token's text
    if (token && token.length > scratch.length) scratch = new Uint8Array(token.length); // a byte per code unit at most
    const n = token ? tokenBytes(token, scratch) : 0;
    if (n < 0) return undefined;
    if (n === 0) {
      kinds[id] = EMPTY;
      pieces.push(undefined);
      continue;
    }
    const bytes = scratch.subarray(0, n);
    // A token that starts with a lead or ASCII byte ends any pending sequence exactly as the end of input does
    // (one U+FFFD for it), so its text can be precomputed from a clean state; if it also leaves the decoder clean
    // (nothing comes out of the flush), the stream needs no decoder for it.
    const text = isContinuation(bytes[0]) ? undefined : utf8.decode(bytes, { stream: true });
    if (text !== undefined && utf8.decode() === '') {
      kinds[id] = TEXT;
      pieces.push(text);
    } else {
      kinds[id] = BYTES;
      pieces.push(bytes.slice());
    }
  }
  return { size, kinds, pieces };
}

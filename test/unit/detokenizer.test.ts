// The two paths of streaming detokenization (lib/tokenizer/detokenizer.ts): which fixture takes which, and that
// either one's pieces add up to the library's whole decode (TextTokenizer.decode) exactly, on every id alone, a
// varied corpus, split and invalid byte runs, special tokens between the bytes of a character, and random ids.
// The byte-level path's premise about UTF-8 (a streaming TextDecoder, flushed where the whole decode ends a run,
// renders invalid bytes as one decode of the run does) is checked against this Node's TextDecoder first.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  BYTES,
  type ByteLevelSource,
  EMPTY,
  MAX_TABLE_IDS,
  SPECIAL,
  TEXT,
  buildByteLevelTable,
} from '../../lib/tokenizer/byte-level-table.js';
import { type DetokenizerPath, StreamDetokenizer } from '../../lib/tokenizer/detokenizer.js';
import { TextTokenizer, loadTokenizer } from '../../lib/tokenizer/tokenizer.js';
import { brokenSurrogate, seeded, streamPieces as stream } from '../helpers/streaming.js';
import { TOKENIZERS_DIR, TOKENIZER_NAMES, referenceOrFailingTest, tokenizerDir } from '../helpers/tokenizers.js';

/** The path each fixture must take: a fixture that silently fell back to the windowed path fails here. */
const EXPECTED_PATH: Record<(typeof TOKENIZER_NAMES)[number], DetokenizerPath> = {
  qwen3: 'byte-level', // ByteLevel decoder
  cl100k: 'byte-level', // ByteLevel decoder, holes in the ids
  mistral: 'windowed', // Sequence [Replace ▁, ByteFallback, Fuse, Strip]
};

/** Streams `ids` one at a time and in random chunks, both skipSpecial values, against the whole decode. */
function expectSameAsDecode(tok: TextTokenizer, ids: readonly number[], rand: () => number, label: string): void {
  for (const skip of [false, true]) {
    const whole = tok.decode(ids, skip);
    const chunks = Array.from({ length: 5 }, () => 1 + Math.floor(rand() * 8));
    for (const steps of [[1], chunks]) {
      const pieces = stream(tok, ids, skip, steps);
      expect(pieces.join(''), `${label} skipSpecial=${skip} steps=${steps}`).toBe(whole);
      for (const p of pieces) expect(brokenSurrogate(p), label).toBe(false);
      if (!whole.includes('\uFFFD')) for (const p of pieces) expect(p, label).not.toContain('\uFFFD');
    }
  }
}

/** Text beyond corpus.json: marks, ZWJ sequences, BOMs, replacement characters, specials between characters. */
const EXTRA_TEXTS = [
  '\uFEFFa BOM first, and one\uFEFF inside',
  'e\u0301\u0302\u0323 stacked marks, \u0915\u094D\u0937 conjunct, \u0E01\u0E34\u0E4A Thai tone',
  '👩🏽‍💻👨‍👩‍👧‍👦🏳️‍🌈🇯🇵🇫🇷 ZWJ and flags 🫠🧑🏿‍🦯',
  '中文测试：日本語のテキスト、한국어 텍스트。𠀀𪚥𩸽 (astral CJK)',
  'literal \uFFFD replacement and \u0000 NUL \u0001\u007F\u0085 controls',
  '世<|im_end|>界<|endoftext|>🌍<think>思考</think>',
  '<|im_start|>assistant\n<think>\n🤔 ok\n</think>\n\n答え<|im_end|>',
  '<s>[INST] ¿Qué tal? [/INST] Très bien </s>',
  'mixed: Ελληνικά Русский עברית العربية हिन्दी ✓ ∑ ∞ ≠ ≤ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
];

describe('UTF-8 streaming, as the byte-level path uses it (this Node TextDecoder)', () => {
  const BYTES_TRIED = [
    0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef,
    0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff,
  ];
  const opts = { fatal: false, ignoreBOM: true } as const;
  const once = new TextDecoder('utf-8', opts);
  const streaming = new TextDecoder('utf-8', opts);

  /** Every cut of `seq` into chunks streamed, then flushed, equals one decode; so does flushing before a lead byte. */
  function check(seq: number[]): void {
    const whole = once.decode(Uint8Array.from(seq));
    for (let mask = 0; mask < 1 << (seq.length - 1); mask++) {
      let out = '';
      for (let i = 1, start = 0; i <= seq.length; i++) {
        if (i === seq.length || (mask >> (i - 1)) & 1) {
          out += streaming.decode(Uint8Array.from(seq.slice(start, i)), { stream: true });
          start = i;
        }
      }
      expect(out + streaming.decode(), `${seq.map((b) => b.toString(16))} cuts ${mask}`).toBe(whole);
    }
    for (let c = 1; c < seq.length; c++) {
      if (seq[c] >= 0x80 && seq[c] <= 0xbf) continue; // a continuation byte may complete the pending character
      const split = once.decode(Uint8Array.from(seq.slice(0, c))) + once.decode(Uint8Array.from(seq.slice(c)));
      expect(split, `${seq.map((b) => b.toString(16))} flushed at ${c}`).toBe(whole);
    }
  }

  it('every sequence of up to 3 bytes (valid, truncated, overlong, surrogate, out of range)', () => {
    const rec = (seq: number[]): void => {
      if (seq.length > 0) check(seq);
      if (seq.length < 3) for (const b of BYTES_TRIED) rec([...seq, b]);
    };
    rec([]);
  });

  it('random sequences of 4 to 9 bytes', () => {
    const rand = seeded(11);
    for (let n = 0; n < 1500; n++) {
      const pick = () => BYTES_TRIED[Math.floor(rand() * BYTES_TRIED.length)];
      check(Array.from({ length: 4 + Math.floor(rand() * 6) }, pick));
    }
  });

  it('keeps a byte order mark wherever it comes, as the library decoder does (ignoreBOM)', () => {
    const bom = [0xef, 0xbb, 0xbf];
    const head = streaming.decode(Uint8Array.from(bom.slice(0, 2)), { stream: true });
    expect(head + streaming.decode(Uint8Array.from([bom[2], 0x41]))).toBe('\uFEFFA');
    expect(once.decode(Uint8Array.from([...bom, ...bom]))).toBe('\uFEFF\uFEFF');
  });
});

describe('byte-level table: where it refuses (the windowed path is then used)', () => {
  const source = (over: Partial<ByteLevelSource>): ByteLevelSource => ({
    size: 4,
    tokenOf: (id) => ['a', 'Ġb', '<x>', 'Ã'][id],
    unkToken: null,
    addedContents: new Set(['<x>']),
    specialIds: new Set([2]),
    ...over,
  });

  it('builds from plain tokens: TEXT for whole characters, BYTES for parts', () => {
    const t = buildByteLevelTable(source({}))!;
    expect([...t.kinds]).toEqual([TEXT, TEXT, SPECIAL, BYTES, EMPTY]); // the last: negative ids (unk: null)
    expect(t.pieces.slice(0, 3)).toEqual(['a', ' b', '<x>']);
    expect(t.pieces[3]).toEqual(Uint8Array.from([0xc3]));
  });

  it('refuses a token with a lone surrogate, a special id that is no added token, and ids near 2^32', () => {
    expect(buildByteLevelTable(source({ tokenOf: (id) => ['a', '\uD83D', '<x>', 'c'][id] }))).toBeUndefined();
    expect(buildByteLevelTable(source({ specialIds: new Set([1]) }))).toBeUndefined();
    expect(buildByteLevelTable(source({ size: MAX_TABLE_IDS + 1 }))).toBeUndefined();
  });
});

describe('a made-up byte-level tokenizer with every odd case, against the library decode', () => {
  /** A ByteLevel BPE whose ids hit each branch: holes rendered as a string unk token, an empty token, a vocabulary
   * token equal to an added token's text, characters outside the byte alphabet, added tokens special or not. */
  const json = (over: Record<string, unknown> = {}, modelOver: Record<string, unknown> = {}) => ({
    added_tokens: [
      { id: 20, content: '<|end|>', special: true, normalized: false },
      { id: 21, content: '<tool>', special: false, normalized: false },
      { id: 22, content: 'Ġhi', special: false, normalized: true },
      { id: 24, content: '', special: false, normalized: false },
    ],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      unk_token: '<unk>',
      merges: [],
      // ä ¸ Ĳ: the bytes E4 B8 96 (世); ï » ¿: a byte order mark; Ã: a lead byte alone; ĸ: 0xAD.
      vocab: { a: 0, Ġb: 1, Ã: 2, '¤': 3, 'x☃': 4, '': 5, '<tool>': 6, ä: 7, '¸': 8, Ĳ: 9, ï: 10, '»': 11, '¿': 12,
        'ðŁĺ': 13, 'Ģ': 14, ĸ: 15, 'Ġ😀': 16, 'ÿ': 17 },
      ...modelOver,
    },
    ...over,
  });
  const make = (over?: Record<string, unknown>, modelOver?: Record<string, unknown>) =>
    new TextTokenizer(json(over, modelOver), {}, undefined, 'made-up tokenizer.json');

  it('takes the byte-level path only for a plain ByteLevel decoder without an end-of-word suffix', () => {
    expect(new StreamDetokenizer(make(), false).path).toBe('byte-level');
    expect(new StreamDetokenizer(make({}, { end_of_word_suffix: '</w>' }), false).path).toBe('windowed');
    const sequence = { type: 'Sequence', decoders: [{ type: 'ByteLevel' }] };
    expect(new StreamDetokenizer(make({ decoder: sequence }), false).path).toBe('windowed');
    expect(new StreamDetokenizer(make({ decoder: null }), false).path).toBe('windowed');
  });

  it('streams every id alone and random ids (negative, holes, past the end) as decode renders them', () => {
    const tok = make();
    expect(tok.size).toBe(25); // 18, 19 and 23 are holes
    for (let id = -1; id <= tok.size; id++) {
      for (const skip of [false, true]) {
        const d = new StreamDetokenizer(tok, skip);
        expect(d.push([id]) + d.finish(), `id ${id}`).toBe(tok.decode([id], skip));
      }
    }
    expect(tok.decode([18, 4], false)).toBe('<unk>x\u0000'); // what the library makes of these; streamed the same
    const rand = seeded(13);
    for (let n = 0; n < 3000; n++) {
      const ids = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => Math.floor(rand() * 28) - 1);
      expectSameAsDecode(tok, ids, rand, `made-up: ${ids}`);
    }
    for (const ids of [[10, 11, 12, 0], [0, 21, 10, 11, 12, 0], [7, 20, 8, 9], [7, 24, 8, 9], [13, 14, 20, 2]]) {
      expectSameAsDecode(tok, ids, rand, `made-up: ${ids}`);
    }
  });
});

describe.each(TOKENIZER_NAMES)('streaming detokenization paths, %s', (name) => {
  const ref = referenceOrFailingTest(name);
  if (ref === undefined) return;
  const corpus = JSON.parse(readFileSync(join(TOKENIZERS_DIR, 'corpus.json'), 'utf8')) as string[];
  let tok: TextTokenizer;
  beforeAll(async () => {
    tok = (await loadTokenizer(tokenizerDir(name)))!;
  });

  it(`takes the ${EXPECTED_PATH[name]} path, decided once for the tokenizer`, () => {
    expect(new StreamDetokenizer(tok, false).path).toBe(EXPECTED_PATH[name]);
    expect(new StreamDetokenizer(tok, true).path).toBe(EXPECTED_PATH[name]);
    expect(tok.byteLevelTable() !== undefined).toBe(EXPECTED_PATH[name] === 'byte-level');
    expect(tok.byteLevelTable()).toBe(tok.byteLevelTable()); // built once, kept on the tokenizer
  });

  it('every id alone streams as it decodes (both skipSpecial values)', () => {
    for (let id = 0; id < tok.size; id++) {
      for (const skip of [false, true]) {
        const d = new StreamDetokenizer(tok, skip);
        expect(d.push([id]) + d.finish(), `id ${id}`).toBe(tok.decode([id], skip));
      }
    }
  });

  it('the corpus and extra texts, with and without special tokens, one id at a time and in random chunks', () => {
    const rand = seeded(3);
    for (const text of [...corpus, ...EXTRA_TEXTS]) {
      expectSameAsDecode(tok, tok.encode(text, true), rand, JSON.stringify(text.slice(0, 40)));
      expectSameAsDecode(tok, tok.encode(text, false), rand, JSON.stringify(text.slice(0, 40)));
    }
  });

  it('matches the HF tokenizers (Rust) references of the corpus', () => {
    for (const c of ref.cases) {
      expect(stream(tok, c.ids, false).join(''), JSON.stringify(c.text)).toBe(c.decoded);
      expect(stream(tok, c.ids_special, true, [2, 1, 3]).join(''), JSON.stringify(c.text)).toBe(c.decoded_skip);
    }
  });

  it('the whole corpus as one long stream', () => {
    const ids = [...corpus, ...EXTRA_TEXTS].flatMap((t) => tok.encode(t, true));
    expect(ids.length).toBeGreaterThan(1500);
    expectSameAsDecode(tok, ids, seeded(5), 'whole corpus');
  });

  it('random ids: corpus ids, any id, special and added ids, ids past the vocabulary and negative ones', () => {
    const rand = seeded(7);
    const pool = [...new Set(ref.cases.flatMap((c) => c.ids_special))];
    const specials = [...tok.specialIds];
    const added = ['<think>', '</think>', '<tool_call>', '<|im_start|>', '<|im_end|>', '<s>', '</s>', '<unk>']
      .map((t) => tok.tokenId(t))
      .filter((id): id is number => id !== undefined);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];
    for (let n = 0; n < 400; n++) {
      const ids = Array.from({ length: 1 + Math.floor(rand() * 40) }, () => {
        const r = rand();
        if (r < 0.55) return pick(pool);
        if (r < 0.8) return Math.floor(rand() * tok.size);
        if (r < 0.92) return pick([...specials, ...added]);
        return pick([tok.size, tok.size + 5, -1]);
      });
      expectSameAsDecode(tok, ids, rand, `random #${n}: ${ids}`);
    }
  });

  it('single-byte tokens in every position of a character, and special tokens between them', () => {
    const table = tok.byteLevelTable();
    if (table === undefined) return; // the windowed path: covered by the tests above
    // The token of each byte, found through the table; a wrong byte there makes the decodes below differ.
    const byteId = new Map<number, number>();
    table.pieces.forEach((p, id) => {
      if (id >= table.size || tok.specialIds.has(id)) return;
      if (p instanceof Uint8Array && p.length === 1 && !byteId.has(p[0])) byteId.set(p[0], id);
      const ascii = typeof p === 'string' && p.length === 1 && p.charCodeAt(0) < 0x80 && table.kinds[id] === TEXT;
      if (ascii && !byteId.has(p.charCodeAt(0))) byteId.set(p.charCodeAt(0), id);
    });
    expect(byteId.size).toBe(243); // all but C0, C1 and F5-FF, never in UTF-8 (alone: TEXT "\uFFFD")
    const id = (b: number) => byteId.get(b)!;
    const special = [...tok.specialIds][0];
    const added = ['<think>', '<|im_start|>'].map((t) => tok.tokenId(t)).filter((x): x is number => x !== undefined);
    const rand = seeded(9);
    for (const [b, bid] of byteId) {
      const forms = [
        [bid],
        [id(0xc2), bid],
        [id(0xe1), bid, id(0x80)],
        [id(0xe0), bid, id(0x80)],
        [id(0xf0), id(0x90), bid, id(0x80)],
        [id(0xf0), bid, id(0x80), id(0x80)],
        [id(0xf4), bid, id(0x80), id(0x80)],
        [id(0xed), bid, id(0x80)],
        [bid, id(0x80)],
        [bid, id(0x80), id(0x80)],
        [bid, id(0xa0), id(0x80), id(0x80)],
        [id(0x41), bid, special, id(0x80), id(0x80)],
        [id(0xe4), special, bid, id(0x96)],
      ];
      if (b === 0xef) forms.push([bid, id(0xbb), id(0xbf), id(0x41)], [id(0x41), added[0], bid, id(0xbb), id(0xbf)]);
      for (const ids of forms) expectSameAsDecode(tok, ids, rand, `byte ${b.toString(16)}: ${ids}`);
    }
    // A character whose bytes a skipped special token separates comes out whole, as in the whole decode.
    const cut = [id(0xe4), special, id(0xb8), id(0x96)]; // 世 is E4 B8 96
    expect(stream(tok, cut, true).join('')).toBe('世');
    expect(stream(tok, cut, false).join('')).toBe(tok.decode(cut, false));
    expect(stream(tok, cut, false).join('')).toContain('\uFFFD');
  });
});

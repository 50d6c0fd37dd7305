// The tokenizer against the HF `tokenizers` library (Rust) and transformers, for every corpus string of three real
// tokenizers (references: scripts/make_tokenizer_refs.py, run on the GPU machine).
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type TextTokenizer } from '../../lib/tokenizer/tokenizer.js';
import { TOKENIZER_NAMES, TRANSFORMERS_DIFFERS, referenceOrFailingTest, tokenizerDir } from '../helpers/tokenizers.js';

const show = (s: string) => JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s);

describe.each(TOKENIZER_NAMES)('tokenizer %s', (name) => {
  const ref = referenceOrFailingTest(name);
  if (ref === undefined) return;
  let tok: TextTokenizer;
  beforeAll(async () => {
    tok = (await loadTokenizer(tokenizerDir(name)))!;
  });

  it('has a reference with every kind of corpus string', () => {
    expect(ref.tokenizer).toBe(name);
    expect(ref.cases.length).toBeGreaterThanOrEqual(50);
    expect(ref.cases.some((c) => c.text === '')).toBe(true);
  });

  it.each(ref.cases.map((c, i) => [i, show(c.text), c] as const))('case %i %s', (_i, _s, c) => {
    // special: false is add_special_tokens=False; special: true adds the post-processor's tokens (BOS).
    expect(tok.encode(c.text, false)).toEqual(c.ids);
    expect(tok.encode(c.text, true)).toEqual(c.ids_special);
    expect(tok.decode(c.ids, false)).toBe(c.decoded);
    expect(tok.decode(c.ids_special, true)).toBe(c.decoded_skip);
  });

  it('agrees with transformers wherever transformers agrees with tokenizers', () => {
    // transformers 5 rebuilds the pre-tokenizer of some tokenizer classes from its own rules instead of taking
    // tokenizer.json's (Mistral's LlamaTokenizer, cl100k's GPT2Tokenizer: see TRANSFORMERS_DIFFERS); it then differs
    // from tokenizer.json on some strings. The references record both; we follow tokenizer.json, as the tokenizers
    // library and every server do.
    const differing = ref.cases.filter((c) => JSON.stringify(c.hf_ids) !== JSON.stringify(c.ids));
    for (const c of ref.cases) {
      if (!differing.includes(c)) expect(tok.encode(c.text, false), show(c.text)).toEqual(c.hf_ids);
    }
    const mayDiffer = TRANSFORMERS_DIFFERS[name];
    if (mayDiffer === undefined) expect(differing).toEqual([]);
    else {
      const specials = [...tok.specialIds].map((id) => tok.decode([id], false));
      expect(differing.filter((c) => !mayDiffer(c.text, specials)).map((c) => c.text)).toEqual([]);
    }
  });

  it('round-trips every string the tokenizer is lossless on', () => {
    const lossless = ref.cases.filter((c) => c.decoded === c.text);
    expect(lossless.length).toBeGreaterThanOrEqual(ref.cases.length * 0.8);
    for (const c of lossless) expect(tok.decode(tok.encode(c.text, false), false), show(c.text)).toBe(c.text);
  });

  it('marks special-token strings in the text as special tokens (split_special_tokens=False)', () => {
    const withSpecial = ref.cases.filter((c) => JSON.stringify(c.ids) !== JSON.stringify(c.ids_split));
    expect(withSpecial.length).toBeGreaterThan(0);
    for (const c of withSpecial) expect(c.ids.some((id) => tok.specialIds.has(id))).toBe(true);
  });

  it('decodes ids past its vocabulary to nothing, and [] to ""', () => {
    expect(tok.decode([], false)).toBe('');
    const hello = ref.cases.find((c) => c.text === 'Hello, world!')!;
    expect(tok.decode([...hello.ids, tok.size + 5], false)).toBe(hello.decoded);
  });
});

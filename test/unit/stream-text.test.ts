// Streaming detokenization and stop strings: pieces never end inside a character, add up to the whole decode, and
// never contain (any part of) a stop string.
import { beforeAll, describe, expect, it } from 'vitest';
import { StopStringMatcher } from '../../lib/generation/stop-strings.js';
import { TextOutput } from '../../lib/generation/text-output.js';
import { loadTokenizer, type TextTokenizer } from '../../lib/tokenizer/tokenizer.js';
import { brokenSurrogate, seeded, streamPieces as stream } from '../helpers/streaming.js';
import { TOKENIZER_NAMES, referenceOrFailingTest, tokenizerDir } from '../helpers/tokenizers.js';

describe.each(TOKENIZER_NAMES)('streaming detokenization, %s', (name) => {
  const ref = referenceOrFailingTest(name);
  if (ref === undefined) return;
  let tok: TextTokenizer;
  beforeAll(async () => {
    tok = (await loadTokenizer(tokenizerDir(name)))!;
  });

  it('splits emoji and CJK over several tokens in this corpus (so the next tests exercise hold-back)', () => {
    const partial = ref.cases.flatMap((c) => c.ids).filter((id) => tok.decode([id], false).includes('\uFFFD'));
    expect(partial.length).toBeGreaterThan(10);
  });

  it.each([false, true])('pieces add up to detokenize(all ids), never with U+FFFD or half a character (skipSpecial %s)', (skip) => {
    for (const c of ref.cases) {
      const whole = tok.decode(c.ids_special, skip);
      for (const steps of [[1], [2, 1, 3]]) {
        const pieces = stream(tok, c.ids_special, skip, steps);
        expect(pieces.join(''), JSON.stringify(c.text)).toBe(whole);
        if (!whole.includes('\uFFFD')) for (const p of pieces) expect(p).not.toContain('\uFFFD');
        for (const p of pieces) expect(brokenSurrogate(p)).toBe(false);
      }
    }
  });

  it('emits an emoji only once its last byte-level token has come', () => {
    const c = ref.cases.find((x) => x.text.startsWith('family: '))!;
    const pieces = stream(tok, c.ids);
    const held = pieces.filter((p, i) => p === '' && i < pieces.length - 1).length;
    if (name !== 'mistral') expect(held).toBeGreaterThan(0); // byte-level: 👨 is several tokens
    expect(pieces.join('')).toBe(c.decoded);
  });

  it('random id sequences (incomplete and invalid byte runs included) still add up to the whole decode', () => {
    const rand = seeded(7);
    const pool = [...new Set(ref.cases.flatMap((c) => c.ids))];
    for (let n = 0; n < 200; n++) {
      const ids = Array.from({ length: 1 + Math.floor(rand() * 24) }, () =>
        rand() < 0.8 ? pool[Math.floor(rand() * pool.length)] : Math.floor(rand() * tok.size),
      );
      expect(stream(tok, ids).join('')).toBe(tok.decode(ids, false));
      expect(stream(tok, ids, true, [3]).join('')).toBe(tok.decode(ids, true));
    }
  });
});

describe('StopStringMatcher', () => {
  const run = (stops: string[], pieces: string[]) => {
    const m = new StopStringMatcher(stops);
    const out: string[] = [];
    for (const p of pieces) {
      const r = m.push(p);
      out.push(r.text);
      if (r.stopped) return { out, stopped: true };
    }
    out.push(m.finish());
    return { out, stopped: false };
  };

  it('stops before a stop string inside one piece', () => {
    expect(run(['STOP'], ['abc STOP def'])).toEqual({ out: ['abc '], stopped: true });
  });

  it('finds a stop string spanning pieces and never emits a part of it', () => {
    const r = run(['</answer>'], ['The answer is 4<', '/ans', 'wer', '>', ' more']);
    expect(r).toEqual({ out: ['The answer is 4', '', '', ''], stopped: true });
  });

  it('releases held-back text once it cannot start a stop string', () => {
    const r = run(['<end>'], ['a <e', 'x> b <', 'en']);
    expect(r.out).toEqual(['a ', '<ex> b ', '', '<en']);
    expect(r.stopped).toBe(false);
  });

  it('the earliest of several stop strings wins, even when a longer one starts first', () => {
    expect(run(['World!', 'lo W'], ['Hello World!'])).toEqual({ out: ['Hel'], stopped: true });
    expect(run(['abcd', 'bc'], ['ab', 'cd'])).toEqual({ out: ['', ''], stopped: true }); // 'abcd' starts first
  });

  it('holds back the longest tail that a stop string starts with', () => {
    const m = new StopStringMatcher(['aab']);
    expect(m.push('xaa').text).toBe('x');
    expect(m.push('a').text).toBe('a'); // "aaa": only the last "aa" could still start "aab"
    expect(m.push('b')).toEqual({ text: '', stopped: true });
  });

  it('with no stop strings passes everything through', () => {
    expect(run([], ['a', 'b'])).toEqual({ out: ['a', 'b', ''], stopped: false });
  });
});

describe('TextOutput: detokenizer and stop strings together', () => {
  let tok: TextTokenizer;
  beforeAll(async () => {
    tok = (await loadTokenizer(tokenizerDir('qwen3')))!;
  });

  it('a stop string spanning several tokens (and a split emoji) ends the text right before it', () => {
    const ids = tok.encode('Sure 👨‍👩‍👧‍👦! is not text here. END_OF_ANSWER and more', false);
    const out = new TextOutput(tok, ['OF_ANS'], true);
    const pieces: string[] = [];
    let used = 0;
    for (const id of ids) {
      pieces.push(out.push([id]));
      used++;
      if (out.stopped) break;
    }
    expect(out.stopped).toBe(true);
    expect(pieces.join('')).toBe('Sure 👨‍👩‍👧‍👦! is not text here. END_');
    expect(out.text).toBe(pieces.join(''));
    expect(used).toBeLessThan(ids.length);
    expect(pieces.join('')).not.toContain('OF');
  });

  it('without a stop string, the pieces and finish() add up to the decoded text', () => {
    const ids = tok.encode('Hello 世界 🌍 <|im_end|>', false);
    const out = new TextOutput(tok, ['never'], true);
    const pieces = ids.map((id) => out.push([id]));
    pieces.push(out.finish());
    expect(pieces.join('')).toBe(tok.decode(ids, true));
    expect(out.text).toBe('Hello 世界 🌍 ');
  });
});

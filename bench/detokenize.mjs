// Streaming detokenization cost on Node's main thread: µs per generated token for the windowed path (two library
// decodes of a window per push, the only path before) and the path the tokenizer takes now (for a byte-level
// tokenizer: a per-id table and a streaming UTF-8 decoder), pushing one id at a time as TextOutput does.
//
//   npm run build:ts && node bench/detokenize.mjs [--tokenizer test/fixtures/tokenizers/qwen3] [--tokens 200000]
//                                                 [--runs 5] [--skip-special]
//
// Ids: the fixture corpus (test/fixtures/tokenizers/corpus.json: multilingual text, code, emoji, special tokens)
// encoded with special tokens and repeated up to --tokens, so characters split over tokens come as often as they do
// in that text. Each run streams all of them through a new detokenizer and checks that the pieces add up to the
// whole decode; the figure is the median of --runs runs. The table the fast path needs is built once per tokenizer,
// before the first run; its build time is reported apart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { StreamDetokenizer } from '../dist/tokenizer/detokenizer.js';
import { loadTokenizer } from '../dist/tokenizer/tokenizer.js';
import { WindowedDetokenizer } from '../dist/tokenizer/windowed-detokenizer.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values: opt } = parseArgs({
  options: {
    tokenizer: { type: 'string', default: join(root, 'test/fixtures/tokenizers/qwen3') },
    tokens: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '5' },
    'skip-special': { type: 'boolean', default: false },
  },
});
const nTokens = Number(opt.tokens), runs = Math.max(1, Number(opt.runs)), skip = opt['skip-special'];

const tok = await loadTokenizer(opt.tokenizer);
if (!tok) throw new Error(`${opt.tokenizer} has no tokenizer.json`);
const corpus = JSON.parse(readFileSync(join(root, 'test/fixtures/tokenizers/corpus.json'), 'utf8'));
const text = corpus.flatMap((t) => tok.encode(t, true));
const ids = Array.from({ length: nTokens }, (_, i) => text[i % text.length]);
const whole = tok.decode(ids, skip);

const t0 = performance.now();
const path = new StreamDetokenizer(tok, skip).path; // builds the byte-level table, if the tokenizer takes that path
const buildMs = performance.now() - t0;

function time(make) {
  const us = [];
  for (let r = 0; r < runs; r++) {
    const d = make();
    let out = '';
    const start = process.hrtime.bigint();
    for (const id of ids) out += d.push([id]);
    out += d.finish();
    us.push(Number(process.hrtime.bigint() - start) / 1e3 / ids.length);
    if (out !== whole) throw new Error('the streamed pieces do not add up to the whole decode');
  }
  us.sort((a, b) => a - b);
  return { median: us[runs >> 1], min: us[0], max: us[runs - 1] };
}

const windowed = time(() => new WindowedDetokenizer(tok, skip));
const current = time(() => new StreamDetokenizer(tok, skip));
const fmt = (x) => `${x.median.toFixed(3)} µs/token (min ${x.min.toFixed(3)}, max ${x.max.toFixed(3)})`;
console.log(`tokenizer ${opt.tokenizer}, ${ids.length} ids, skipSpecial ${skip}, median of ${runs} runs`);
console.log(`Node ${process.version}`);
console.log(`${'windowed (before):'.padEnd(20)}${fmt(windowed)}`);
console.log(`${`${path} (now):`.padEnd(20)}${fmt(current)}; table built in ${buildMs.toFixed(0)} ms, once`);
console.log(`speed-up: ${(windowed.median / current.median).toFixed(1)}x`);

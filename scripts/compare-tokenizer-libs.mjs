// Compares JS tokenizer libraries against the HF `tokenizers` (Rust) references in test/fixtures/tokenizers:
// correctness on every corpus string and encode/decode speed (lib/tokenizer/README.md has the results).
// The candidates are not dependencies of vtengine; install them in a scratch folder and run it from there:
//   mkdir /tmp/cmp && cd /tmp/cmp && npm init -y && npm install @lenml/tokenizers@3.7.2 @huggingface/tokenizers@0.2.0
//   cp <repo>/scripts/compare-tokenizer-libs.mjs . && node compare-tokenizer-libs.mjs <repo>/test/fixtures/tokenizers [rev]
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { TokenizerLoader } from '@lenml/tokenizers';

const DIR = process.argv[2];
const names = ['qwen3', 'cl100k', 'mistral'];
const libsAll = {
  '@huggingface/tokenizers': (json, config) => {
    const t = new Tokenizer(json, config);
    return {
      encode: (s, special) => t.encode(s, { add_special_tokens: special }).ids,
      decode: (ids, skip) => (ids.length ? t.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }) : ''),
    };
  },
  '@lenml/tokenizers': (json, config) => {
    const t = TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config });
    return {
      encode: (s, special) => t.encode(s, { add_special_tokens: special }),
      decode: (ids, skip) => (ids.length ? t.decode(ids, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }) : ''),
    };
  },
};
const libs = process.argv[3] === 'rev' ? Object.fromEntries(Object.entries(libsAll).reverse()) : libsAll;
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
for (const [lib, make] of Object.entries(libs)) {
  for (const name of names) {
    const rawJson = readFileSync(join(DIR, name, 'tokenizer.json'), 'utf8');
    const config = JSON.parse(readFileSync(join(DIR, name, 'tokenizer_config.json'), 'utf8'));
    const ref = JSON.parse(readFileSync(join(DIR, name, 'reference.json'), 'utf8'));
    let t0 = performance.now();
    const t = make(JSON.parse(rawJson), config);
    const loadMs = performance.now() - t0;
    let bad = { ids: 0, special: 0, decode: 0, skip: 0 };
    const fails = [];
    for (const c of ref.cases) {
      try {
        if (!eq(t.encode(c.text, false), c.ids)) { bad.ids++; fails.push(c.text.slice(0, 30)); }
        if (!eq(t.encode(c.text, true), c.ids_special)) bad.special++;
        if (t.decode(c.ids, false) !== c.decoded) bad.decode++;
        if (t.decode(c.ids_special, true) !== c.decoded_skip) bad.skip++;
      } catch (e) { bad.ids++; fails.push('THROW ' + e.message.slice(0, 60)); }
    }
    const texts = ref.cases.map((c) => c.text).filter(Boolean);
    const bytes = texts.reduce((n, s) => n + Buffer.byteLength(s), 0);
    for (const s of texts) t.encode(s, false); // warm up
    t0 = performance.now();
    const reps = 50;
    for (let r = 0; r < reps; r++) for (const s of texts) t.encode(s, false);
    const mbs = (bytes * reps) / ((performance.now() - t0) / 1000) / 1e6;
    const allIds = ref.cases.map((c) => c.ids);
    t0 = performance.now();
    for (let r = 0; r < reps; r++) for (const ids of allIds) t.decode(ids, false);
    const decMs = (performance.now() - t0) / reps;
    console.log(`${lib.padEnd(24)} ${name.padEnd(8)} load ${loadMs.toFixed(0)} ms; mismatches of ${ref.cases.length}: ${JSON.stringify(bad)}; encode ${mbs.toFixed(2)} MB/s (rust ${ref.speed_rust_single_thread.mb_per_s.toFixed(2)}); decode corpus ${decMs.toFixed(2)} ms ${fails.length ? JSON.stringify(fails) : ''}`);
  }
}

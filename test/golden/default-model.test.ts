// The shipped default model (models/default/, made by scripts/train_default_model.py) against the figures that
// transformers computed in float64 on the same bf16 files (test/fixtures/default-model/transformers-reference.json):
// the tokenizer round-trips Python source exactly and gives transformers' ids; the engine's mean negative
// log-likelihood of a held-out stdlib file is transformers' within 0.5%; greedy decoding gives transformers' tokens.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';

const MODEL_DIR = fileURLToPath(new URL('../../models/default', import.meta.url));
const FIXTURE_DIR = fileURLToPath(new URL('../fixtures/default-model', import.meta.url));
const REPO_DIR = fileURLToPath(new URL('../..', import.meta.url));

const NLL_REL_TOL = 0.005; // the acceptance figure
const TOKEN_LOGPROB_TOL = 0.05; // any single token, in nats: catches a position-dependent bug the mean could hide
const MIN_MARGIN = 1e-3; // as in greedy.test.ts: below this top-1/top-2 margin, fp32 rounding may pick either

interface Reference {
  file: string;
  ids: number[];
  n_tokens_file: number;
  truncated_to: number | null;
  mean_nll: number;
  n_predicted: number;
  logprobs: number[];
  greedy: { prompt: string; prompt_ids: number[]; max_tokens: number; ids: number[]; margins: number[]; text: string };
  roundtrip_strings: Array<{ text: string; ids: number[] }>;
  transformers: string;
  torch: string;
}

const ref = JSON.parse(readFileSync(join(FIXTURE_DIR, 'transformers-reference.json'), 'utf8')) as Reference;
const heldout = readFileSync(join(FIXTURE_DIR, ref.file), 'utf8');

// Python-like text the byte-level BPE must keep byte for byte (beyond the reference's own strings).
const TRICKY = [
  'def f(a,\tb):\n\t\tif a:\n\t\t\treturn b  \t \n',
  'x = [\n        1,    2,\n    ]\r\n\r\n\n\n\n',
  '    ' + ' '.repeat(37) + '# deep\n',
  "s = 'ünïcödé — ✓ 日本語 🐍 \\u00e9'\n",
  'π = 3.14159  # 𝔘𝔫𝔦𝔠𝔬𝔡𝔢\u00a0nbsp\u200bzwsp\n',
  '<|endoftext|> is the special token\n',
  ' leading space',
  'trailing spaces   ',
  '\n',
  '',
];

describe('default model (models/default)', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.load(MODEL_DIR, { device: 'cpu', threads: 2 });
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it('is a bf16 Qwen3 checkpoint of at most 25 MB', () => {
    expect(engine.modelInfo.architecture).toBe('Qwen3ForCausalLM');
    expect(engine.modelInfo.dtype).toBe('bfloat16');
    const bytes = readdirSync(MODEL_DIR).reduce((n, f) => n + statSync(join(MODEL_DIR, f)).size, 0);
    expect(bytes).toBeLessThanOrEqual(25_000_000);
    for (const f of readdirSync(MODEL_DIR).filter((f) => f.endsWith('.safetensors'))) {
      expect(statSync(join(MODEL_DIR, f)).size, f).toBeLessThanOrEqual(15_000_000);
    }
  });

  describe('tokenizer', () => {
    it(`gives transformers' ids for ${ref.file} and decodes them back to the exact file`, () => {
      const ids = engine.tokenize(heldout, { special: false });
      expect(ids).toHaveLength(ref.n_tokens_file);
      expect(ids.slice(0, ref.ids.length)).toEqual(ref.ids);
      expect(engine.detokenize(ids)).toBe(heldout);
      expect(engine.tokenize(heldout)).toEqual(ids); // the tokenizer adds no special tokens of its own
    });

    it("gives transformers' ids for tabs, whitespace runs, CRLF and unicode", () => {
      for (const { text, ids } of ref.roundtrip_strings) {
        expect(engine.tokenize(text, { special: false }), JSON.stringify(text)).toEqual(ids);
        expect(engine.detokenize(ids), JSON.stringify(text)).toBe(text);
      }
    });

    it('round-trips other Python source and tricky strings exactly', () => {
      const sources = [
        ...TRICKY,
        readFileSync(join(REPO_DIR, 'scripts/train_default_model.py'), 'utf8'),
        readFileSync(join(REPO_DIR, 'scripts/make_fixtures.py'), 'utf8'),
      ];
      for (const s of sources) {
        expect(engine.detokenize(engine.tokenize(s, { special: false })), JSON.stringify(s.slice(0, 60))).toBe(s);
      }
    });
  });

  it(`mean NLL of ${ref.file} equals transformers' within 0.5%`, async () => {
    // score() runs as a one-token request, so a sequence must leave one position free in the context. Causal
    // attention makes transformers' logprobs of a prefix those of the whole, so any prefix compares exactly.
    const n = Math.min(ref.ids.length, engine.modelInfo.maxContext - 1);
    const { logprobs, meanNll } = await engine.score({ tokens: ref.ids.slice(0, n) });
    expect(logprobs).toHaveLength(n - 1);
    const want = ref.logprobs.slice(0, n - 1);
    const wantNll = -want.reduce((a, b) => a + b, 0) / want.length;
    if (n === ref.ids.length) expect(wantNll).toBeCloseTo(ref.mean_nll, 9);
    const rel = Math.abs(meanNll - wantNll) / wantNll;
    const worst = Math.max(...logprobs.map((lp, i) => Math.abs(lp - want[i])));
    console.log(
      `default model, ${n} tokens of ${ref.file}: mean NLL ${meanNll.toFixed(6)} ` +
        `vs transformers ${wantNll.toFixed(6)} (rel ${rel.toExponential(2)}), ` +
        `worst token |Δlogprob| ${worst.toExponential(2)}`,
    );
    expect(rel).toBeLessThanOrEqual(NLL_REL_TOL);
    expect(worst).toBeLessThanOrEqual(TOKEN_LOGPROB_TOL);
  });

  it(`greedy continuation of ${JSON.stringify(ref.greedy.prompt)} equals transformers'`, async () => {
    expect(engine.tokenize(ref.greedy.prompt, { special: false })).toEqual(ref.greedy.prompt_ids);
    const result = await engine.generate(
      { tokens: ref.greedy.prompt_ids },
      // Plain greedy, as the reference: the model's generation_config.json adds a repetition penalty by default.
      { maxTokens: ref.greedy.max_tokens, temperature: 0, repetitionPenalty: 1, stopTokenIds: [] },
    );
    expect(engine.generationDefaults).toEqual({ temperature: 0, repetitionPenalty: 1.3 });
    expect(result.tokenIds).toHaveLength(ref.greedy.max_tokens);
    const close = ref.greedy.margins.findIndex((m) => m < MIN_MARGIN);
    const n = close < 0 ? ref.greedy.ids.length : close;
    expect(result.tokenIds.slice(0, n)).toEqual(ref.greedy.ids.slice(0, n));
    if (n === ref.greedy.ids.length) {
      expect(engine.detokenize([...ref.greedy.prompt_ids, ...result.tokenIds])).toBe(ref.greedy.text);
    }
  });
});

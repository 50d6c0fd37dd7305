// generation_config.json → sampling defaults, with transformers' rules: greedy unless do_sample is true; with
// sampling, unset temperature / top_k fall back to transformers' GenerationConfig defaults (1 and 50).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { readGenerationDefaults } from '../../lib/generation/defaults.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function withConfig(config: unknown): string {
  const d = mkdtempSync(join(tmpdir(), 'vt-gc-'));
  dirs.push(d);
  if (config !== undefined) writeFileSync(join(d, 'generation_config.json'), typeof config === 'string' ? config : JSON.stringify(config));
  return d;
}

describe('readGenerationDefaults', () => {
  it('is greedy without a file and without do_sample', async () => {
    expect(await readGenerationDefaults(withConfig(undefined))).toEqual({ temperature: 0 });
    expect(await readGenerationDefaults(withConfig({ temperature: 0.6, top_p: 0.9 }))).toEqual({ temperature: 0 });
    expect(await readGenerationDefaults(withConfig({ do_sample: null, temperature: null, eos_token_id: null }))).toEqual({ temperature: 0 });
  });

  // The native loader refuses these files too (it reads the token ids); the JS side must not default silently, nor
  // fail with a TypeError (a `null` file once did).
  it.each([
    ['text that is not JSON', '{not json'],
    ['null', 'null'],
    ['an array', '[]'],
    ['a number', '5'],
    ['do_sample as a string', { do_sample: 'true' }],
    ['temperature as a string', { do_sample: true, temperature: '0.7' }],
    ['top_k as a list', { top_k: [20] }],
    ['repetition_penalty as an object', { repetition_penalty: {} }],
    ['eos_token_id as a string', { eos_token_id: '2' }],
    ['eos_token_id with a fraction in its list', { eos_token_id: [2, 1.5] }],
    ['eos_token_id past int32', { eos_token_id: 2 ** 31 }],
    ['a negative bos_token_id', { bos_token_id: -1 }],
  ])('refuses %s with ERR_BAD_CHECKPOINT', async (_what, config) => {
    await expect(readGenerationDefaults(withConfig(config))).rejects.toMatchObject({ code: 'ERR_BAD_CHECKPOINT' });
  });

  it('refuses a file that is not UTF-8', async () => {
    const d = withConfig(undefined);
    writeFileSync(join(d, 'generation_config.json'), Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]));
    await expect(readGenerationDefaults(d)).rejects.toMatchObject({ code: 'ERR_BAD_CHECKPOINT', message: /UTF-8/ });
  });

  it("takes Qwen3's sampling settings", async () => {
    // Qwen3-0.6B's generation_config.json
    const d = withConfig({ do_sample: true, temperature: 0.6, top_k: 20, top_p: 0.95, eos_token_id: [151645, 151643] });
    expect(await readGenerationDefaults(d)).toEqual({ temperature: 0.6, topK: 20, topP: 0.95 });
  });

  it('falls back to temperature 1 and top_k 50 when sampling without them, and keeps a repetition penalty', async () => {
    expect(await readGenerationDefaults(withConfig({ do_sample: true, repetition_penalty: 1.1 }))).toEqual({
      temperature: 1,
      topK: 50,
      repetitionPenalty: 1.1,
    });
    expect(await readGenerationDefaults(withConfig({ repetition_penalty: 1.3 }))).toEqual({ temperature: 0, repetitionPenalty: 1.3 });
  });
});

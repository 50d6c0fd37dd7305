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
  it('is greedy without a file, with a broken file, and without do_sample', async () => {
    expect(await readGenerationDefaults(withConfig(undefined))).toEqual({ temperature: 0 });
    expect(await readGenerationDefaults(withConfig('{not json'))).toEqual({ temperature: 0 });
    expect(await readGenerationDefaults(withConfig({ temperature: 0.6, top_p: 0.9 }))).toEqual({ temperature: 0 });
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

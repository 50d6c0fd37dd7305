/**
 * Sampling defaults from the checkpoint's generation_config.json, as transformers applies them: with
 * `do_sample: true` its temperature / top_k / top_p / min_p hold (top_k 50 and temperature 1 when unset, as in
 * transformers' GenerationConfig); otherwise decoding is greedy. A repetition_penalty applies either way.
 * Options given to generate() always win.
 * @module
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The sampling defaults a checkpoint asks for; every field is a {@link GenerateOptions} field. */
export interface GenerationDefaults {
  /** The default {@link GenerateOptions.temperature}: 0 (greedy) unless the checkpoint sets `do_sample: true`. */
  temperature: number;
  /** The default {@link GenerateOptions.topK}, when the checkpoint samples (`top_k`, 50 if unset). */
  topK?: number;
  /** The default {@link GenerateOptions.topP}, when the checkpoint samples and sets `top_p` below 1. */
  topP?: number;
  /** The default {@link GenerateOptions.minP}, when the checkpoint samples and sets `min_p`. */
  minP?: number;
  /** The default {@link GenerateOptions.repetitionPenalty}, when the checkpoint sets `repetition_penalty`. */
  repetitionPenalty?: number;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * Reads `<dir>/generation_config.json`; a missing or unreadable file means greedy decoding.
 * @internal
 */
export async function readGenerationDefaults(dir: string): Promise<GenerationDefaults> {
  let gc: Record<string, unknown>;
  try {
    gc = JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8')) as Record<string, unknown>;
  } catch {
    return { temperature: 0 };
  }
  const out: GenerationDefaults = { temperature: 0 };
  const rp = num(gc.repetition_penalty);
  if (rp !== undefined && rp > 0 && rp !== 1) out.repetitionPenalty = rp;
  if (gc.do_sample !== true) return out;
  const temperature = num(gc.temperature) ?? 1;
  out.temperature = temperature > 0 ? temperature : 0;
  const topK = num(gc.top_k) ?? 50;
  if (Number.isInteger(topK) && topK > 0) out.topK = topK;
  const topP = num(gc.top_p);
  if (topP !== undefined && topP > 0 && topP < 1) out.topP = topP;
  const minP = num(gc.min_p);
  if (minP !== undefined && minP > 0 && minP <= 1) out.minP = minP;
  return out;
}

/**
 * Sampling defaults from the checkpoint's generation_config.json, as transformers applies them: with
 * `do_sample: true` its temperature / top_k / top_p / min_p hold (top_k 50 and temperature 1 when unset, as in
 * transformers' GenerationConfig); otherwise decoding is greedy. A repetition_penalty applies either way.
 * Options given to generate() always win. A file that is there but malformed (not a JSON object, a field of the
 * wrong type) is a BadCheckpointError, as the native loader, which reads its token ids, treats it.
 * @module
 */
import { join } from 'node:path';
import { isTokenId, parseCheckpointJson, readCheckpointText } from '../checkpoint-files.js';
import { BadCheckpointError } from '../errors.js';
import { show } from '../validation.js';

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

/** Fields whose JSON type the engine relies on: anything else in them is a malformed file, not a default. */
const NUMBER_FIELDS = ['temperature', 'top_k', 'top_p', 'min_p', 'repetition_penalty'] as const;

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/**
 * Checks the types of the fields the engine reads (null counts as unset, as in transformers): do_sample a boolean,
 * the sampling fields numbers, eos_token_id a token id or a list of them, bos_token_id a token id. The native
 * loader reads the ids from the same file; a mistyped one must not be skipped silently.
 */
function checkTypes(gc: Record<string, unknown>, file: string): void {
  const bad = (field: string, want: string): never => {
    throw new BadCheckpointError(`${file}: "${field}" must be ${want}, got ${show(gc[field])}. Fix or remove the field.`);
  };
  const set = (field: string): boolean => gc[field] !== undefined && gc[field] !== null;
  if (set('do_sample') && typeof gc.do_sample !== 'boolean') bad('do_sample', 'true or false');
  for (const field of NUMBER_FIELDS) if (set(field) && num(gc[field]) === undefined) bad(field, 'a number');
  const eos = gc.eos_token_id;
  if (set('eos_token_id') && !isTokenId(eos) && !(Array.isArray(eos) && eos.every(isTokenId))) {
    bad('eos_token_id', 'a token id (an integer from 0 to 2^31 - 1) or a list of them');
  }
  if (set('bos_token_id') && !isTokenId(gc.bos_token_id)) bad('bos_token_id', 'a token id (an integer from 0 to 2^31 - 1)');
}

/**
 * Reads `<dir>/generation_config.json`; a missing file means greedy decoding.
 * @throws BadCheckpointError when the file is not UTF-8 JSON holding an object, or a field it uses has the wrong type.
 * @internal
 */
export async function readGenerationDefaults(dir: string): Promise<GenerationDefaults> {
  const file = join(dir, 'generation_config.json');
  const text = await readCheckpointText(file);
  if (text === undefined) return { temperature: 0 };
  const gc = parseCheckpointJson(text, file);
  checkTypes(gc, file);
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

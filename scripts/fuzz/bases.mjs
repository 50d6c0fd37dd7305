// The well-formed checkpoints mutants are made from: tiny fixtures of every family and weight dtype (one sharded),
// the packaged default model (a real tokenizer) and qwen3-tok (a real Qwen3 tokenizer and chat template, slower to
// load: about 3 s on one core, so it is left out of the bounded test run).
import { existsSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './engine-bundle.mjs';
import { readSafetensors } from './safetensors.mjs';

/** Base names to folders, relative to the package root. */
export const BASES = {
  'llama-bf16': 'test/fixtures/llama-bf16',
  'llama-f32-linear': 'test/fixtures/llama-f32-linear',
  'qwen2-f16': 'test/fixtures/qwen2-f16',
  'qwen3-bf16-sharded': 'test/fixtures/qwen3-bf16-sharded',
  'qwen3-f32-v5config': 'test/fixtures/qwen3-f32-v5config',
  default: 'models/default',
  'qwen3-tok': 'test/fixtures/qwen3-tok',
};

/** How often each base is drawn (default 1): qwen3-tok costs three to five times a tiny fixture's run. */
export const BASE_WEIGHTS = { 'qwen3-tok': 0.3 };

/** What the bounded test run uses: every base but the slow qwen3-tok. */
export const FAST_BASES = Object.keys(BASES).filter((b) => b !== 'qwen3-tok');

/**
 * @typedef {object} Base
 * @property {string} name
 * @property {string} dir - absolute
 * @property {string[]} files - regular files (symlinks followed)
 * @property {string[]} shards - the safetensors files
 * @property {boolean} sharded - has model.safetensors.index.json
 * @property {Map<string, { dtype: string, shape: number[], size: number }>} tensors - by name, across shards
 */

/** @returns {Base} */
export function loadBase(name) {
  if (!Object.hasOwn(BASES, name)) throw new Error(`unknown base "${name}" (known: ${Object.keys(BASES).join(', ')})`);
  const dir = join(ROOT, BASES[name]);
  if (!existsSync(dir)) throw new Error(`base "${name}": ${dir} does not exist`);
  const files = readdirSync(dir).filter((f) => statSync(realpathSync(join(dir, f))).isFile());
  const shards = files.filter((f) => f.endsWith('.safetensors')).sort();
  const tensors = new Map();
  for (const shard of shards) {
    for (const [tensor, e] of readSafetensors(join(dir, shard)).entries) {
      if (tensor !== '__metadata__') tensors.set(tensor, { dtype: e.dtype, shape: e.shape, size: e.data_offsets[1] - e.data_offsets[0] });
    }
  }
  return { name, dir, files, shards, sharded: files.includes('model.safetensors.index.json'), tensors };
}

// The oracle: reads a checkpoint folder from disk (never the mutation's own description of itself) and lists every
// rule it breaks. The fuzzer asks it only about checkpoints that loaded; each violation is then a silent load of
// that kind. Kinds in ACCEPTANCE_KINDS are the two classes issue 19's acceptance names.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { checkConfig } from './config-oracle.mjs';
import { checkSafetensors } from './safetensors-oracle.mjs';
import { isObject, parseStrict } from './strict-json.mjs';
import { checkGenerationConfig, checkTokenizer, checkTokenizerConfig } from './text-oracle.mjs';

/** Overlapping or misaligned offsets; an activation the engine does not implement. ('st-gap', bytes no tensor
 * covers, is the same tiling rule but not one of the two classes.) */
export const ACCEPTANCE_KINDS = new Set(['st-offsets', 'config-activation']);

const decoder = new TextDecoder('utf-8', { fatal: true });
const INDEX = 'model.safetensors.index.json';

/** @returns {{ kind: string, detail: string }[]} */
export function judge(dir) {
  const out = [];
  const file = (name) => join(dir, name);
  const isFile = (name) => existsSync(file(name)) && statSync(file(name)).isFile();
  /** Parses a JSON file, or records `kind` and returns undefined. */
  const json = (name, kind, big = false) => {
    try {
      const bytes = readFileSync(file(name));
      // A large tokenizer.json goes through JSON.parse: its duplicate keys and exact big integers do not matter.
      return big ? JSON.parse(decoder.decode(bytes)) : parseStrict(bytes).value;
    } catch (err) {
      out.push({ kind, detail: `${name} is not UTF-8 JSON (${err.message})` });
      return undefined;
    }
  };
  const guard = (what, fn) => {
    try {
      fn();
    } catch (err) {
      out.push({ kind: 'oracle-error', detail: `${what}: ${err.stack}` });
    }
  };

  let names = null;
  guard('safetensors', () => {
    const tensors = new Map();
    let shards = ['model.safetensors'];
    if (isFile(INDEX)) shards = checkIndex(json(INDEX, 'index'), isFile, out);
    for (const shard of shards) {
      if (!isFile(shard)) continue; // the engine reports a missing shard itself
      const r = checkSafetensors(readFileSync(file(shard)), shard);
      out.push(...r.violations);
      for (const [n, e] of r.tensors) tensors.set(n, e);
    }
    // A weight_map entry naming another shard than the one holding the tensor is not a violation: transformers,
    // like the engine, loads every tensor of every shard the index names.
    names = new Set(tensors.keys());
  });
  guard('config.json', () => {
    if (isFile('config.json')) {
      const cfg = json('config.json', 'config-json');
      if (cfg !== undefined) out.push(...checkConfig(cfg, names));
    }
  });
  for (const [name, kind, check, big] of [
    ['tokenizer.json', 'tokenizer-json', checkTokenizer, true],
    ['tokenizer_config.json', 'tokenizer-config', checkTokenizerConfig, false],
    ['generation_config.json', 'generation-config', checkGenerationConfig, false],
  ]) {
    guard(name, () => {
      // tokenizer_config.json belongs to tokenizer.json: without a tokenizer nothing reads it.
      if (!isFile(name) || (name === 'tokenizer_config.json' && !isFile('tokenizer.json'))) return;
      const value = json(name, kind, big);
      if (value !== undefined) out.push(...check(value));
    });
  }
  return out;
}

/** The shards an index names; its malformations are violations of kind 'index'. */
function checkIndex(j, isFile, out) {
  if (!isObject(j) || !isObject(j.weight_map)) {
    out.push({ kind: 'index', detail: 'model.safetensors.index.json has no weight_map object' });
    return [];
  }
  const shards = new Set();
  for (const [n, s] of Object.entries(j.weight_map)) {
    if (typeof s !== 'string' || s === '' || s.includes('/') || s === '.' || s === '..' || !isFile(s)) {
      out.push({ kind: 'index', detail: `weight_map["${n}"] = ${JSON.stringify(s)} is not a shard file` });
    } else shards.add(s);
  }
  return [...shards];
}

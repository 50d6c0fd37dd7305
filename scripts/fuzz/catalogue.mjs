// The mutation catalogue, and how a mutant is drawn from it: a base, then one or two mutations chosen by weight
// among those that apply to the base. Mutant i of a seed depends on (seed, i) alone.
import { BASE_WEIGHTS } from './bases.mjs';
import { Rng } from './prng.mjs';
import { bodyMutations } from './mutations/body.mjs';
import { configMutations } from './mutations/config.mjs';
import { generationConfigMutations } from './mutations/generation-config.mjs';
import { headerMutations } from './mutations/header.mjs';
import { indexMutations } from './mutations/index.mjs';
import { jsonFileMutations } from './mutations/json-file.mjs';
import { tokenizerConfigMutations } from './mutations/tokenizer-config.mjs';
import { tokenizerMutations } from './mutations/tokenizer.mjs';

export const CATALOGUE = [
  ...configMutations,
  ...jsonFileMutations('config.json', 'config'),
  ...headerMutations,
  ...bodyMutations,
  ...indexMutations,
  ...jsonFileMutations('model.safetensors.index.json', 'index'),
  ...tokenizerMutations,
  ...jsonFileMutations('tokenizer.json', 'tokenizer'),
  ...tokenizerConfigMutations,
  ...jsonFileMutations('tokenizer_config.json', 'tokenizer-config'),
  ...generationConfigMutations,
  ...jsonFileMutations('generation_config.json', 'generation-config'),
];

/**
 * Relative weights (default 1). The two classes the acceptance names (offsets that do not tile, an activation the
 * engine does not implement) and the broad config edits are drawn more often.
 */
const WEIGHTS = {
  'header/shift-offsets': 4,
  'header/overlap': 3,
  'config/hidden-act': 3,
  'config/delete-field': 3,
  'config/retype-field': 3,
  'config/edge-number': 4,
  'config/rope-scaling': 2,
  'body/bitflip-data': 2,
};

/** Tokenizer files exist in two bases only (default, qwen3-tok): their mutations weigh more there. */
const weightOf = (kind) => WEIGHTS[kind] ?? (kind.startsWith('tokenizer') ? 3 : 1);

/**
 * Draws mutant `index`'s plan and applies it to `mutant` (whose base is already chosen by planBase).
 * @returns {{ kind: string, detail: string }[]}
 */
export function applyMutations(mutant, seed, index) {
  const rng = new Rng(seed, index);
  rng.next(); // the base draw (planBase)
  const usable = CATALOGUE.filter((mu) => mu.applies(mutant.base));
  const count = rng.chance(0.7) ? 1 : 2;
  const done = [];
  for (let tries = 0; done.length < count && tries < 20; tries++) {
    const mu = rng.weighted(usable.map((x) => [weightOf(x.kind), x]));
    const detail = mu.apply(mutant, rng);
    if (detail !== null) done.push({ kind: mu.kind, detail });
  }
  return done;
}

/** The base of mutant `index`: the first draw of its stream, by BASE_WEIGHTS. */
export function planBase(bases, seed, index) {
  return new Rng(seed, index).weighted(bases.map((b) => [BASE_WEIGHTS[b.name] ?? 1, b]));
}

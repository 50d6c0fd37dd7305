// Mutations of generation_config.json: the sampling fields and token ids the engine reads, retyped or at the
// edges of their ranges.
import { raw, show } from '../raw-json.mjs';
import { jsonEdit } from './edit.mjs';
import { otherType, randomKey } from './values.mjs';

const FILE = 'generation_config.json';
const FIELDS = ['do_sample', 'temperature', 'top_k', 'top_p', 'min_p', 'repetition_penalty', 'eos_token_id', 'bos_token_id',
  'max_length', 'max_new_tokens', 'pad_token_id'];

/** A generation_config mutation: edits the parsed object in place and says what it did. */
const edit = jsonEdit(FILE);

export const generationConfigMutations = [
  edit('generation-config/retype-field', (j, rng) => {
    const key = rng.pick(FIELDS);
    j[key] = otherType(rng, j[key] ?? 0);
    return `${key} = ${show(j[key])}`;
  }),
  edit('generation-config/sampling-values', (j, rng) => {
    j.do_sample = rng.chance(0.8);
    const [key, values] = rng.pick([
      ['temperature', [0, -1, 1e-30, 1e30, 2.5]],
      ['top_k', [-1, 0, 1.5, 1e9, 2 ** 31]],
      ['top_p', [0, -0.5, 1.5, 1e-30]],
      ['min_p', [-1, 2, 0, 1]],
      ['repetition_penalty', [0, -1, 1e-30, 1e30, 0.5]],
    ]);
    j[key] = rng.pick(values);
    return `do_sample = ${j.do_sample}, ${key} = ${show(j[key])}`;
  }),
  edit('generation-config/eos-ids', (j, rng) => {
    const key = rng.pick(['eos_token_id', 'eos_token_id', 'bos_token_id']);
    j[key] = rng.pick([-1, raw('1e10'), [2, 'x'], 2 ** 31, 100000, [], [2, 1.5], Array.from({ length: 40 }, (_, i) => i)]);
    return `${key} = ${show(j[key])}`;
  }),
  edit('generation-config/delete-field', (j, rng) => {
    const key = randomKey(rng, j);
    if (key === undefined) return null;
    delete j[key];
    return `delete ${key}`;
  }),
];

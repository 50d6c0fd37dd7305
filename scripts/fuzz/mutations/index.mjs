// Mutations of model.safetensors.index.json (sharded checkpoints): a tensor mapped to the wrong shard, entries
// dropped or invented, shard names that escape the folder or do not exist.
import { show } from '../raw-json.mjs';
import { isObject, randomKey } from './values.mjs';

const FILE = 'model.safetensors.index.json';

const edit = (kind, fn) => ({
  kind,
  applies: (base) => base.sharded,
  apply(m, rng) {
    const j = m.json(FILE);
    if (!isObject(j) || !isObject(j.weight_map)) return null;
    return fn(j.weight_map, rng, m, j);
  },
});

export const indexMutations = [
  edit('index/wrong-shard', (map, rng, m) => {
    const name = randomKey(rng, map);
    const others = m.base.shards.filter((s) => s !== map[name]);
    if (!name || others.length === 0) return null;
    const to = rng.pick(others);
    const from = map[name];
    map[name] = to;
    return `weight_map["${name}"] ${from} -> ${to} (the tensor is not in ${to})`;
  }),
  edit('index/drop-entry', (map, rng) => {
    const name = randomKey(rng, map);
    if (!name) return null;
    delete map[name];
    return `weight_map loses "${name}" (its shard still holds it)`;
  }),
  edit('index/unknown-tensor', (map, rng, m) => {
    map['model.layers.99.mlp.extra.weight'] = rng.pick(m.base.shards);
    return 'weight_map names a tensor no shard holds';
  }),
  edit('index/bad-shard-name', (map, rng) => {
    const name = randomKey(rng, map);
    if (!name) return null;
    map[name] = rng.pick(['model-00009-of-00003.safetensors', '../model.safetensors', '/etc/passwd', 'sub/x.safetensors', '',
      5, null, '.', '..', 'model.safetensors.index.json', 'config.json']);
    return `weight_map["${name}"] = ${show(map[name])}`;
  }),
  edit('index/weight-map-type', (_map, rng, _m, j) => {
    j.weight_map = rng.pick([[], 'x', null, 5, {}]);
    return `weight_map = ${show(j.weight_map)}`;
  }),
];

// Mutations of tokenizer.json: missing or mistyped parts, a model type that is wrong or unknown, added tokens with
// ids that are not token ids, vocabularies of the wrong shape.
import { raw, show } from '../raw-json.mjs';
import { jsonEdit } from './edit.mjs';
import { isObject, otherType } from './values.mjs';

const FILE = 'tokenizer.json';

/** A tokenizer mutation: edits the parsed object in place and says what it did. */
const edit = jsonEdit(FILE);

const added = (j) => (Array.isArray(j.added_tokens) ? j.added_tokens.filter(isObject) : []);

export const tokenizerMutations = [
  edit('tokenizer/delete-field', (j, rng) => {
    const key = rng.pick(['model', 'added_tokens', 'normalizer', 'pre_tokenizer', 'post_processor', 'decoder', 'truncation',
      'padding', 'version']);
    delete j[key];
    return `delete ${key}`;
  }),
  edit('tokenizer/model-type', (j, rng) => {
    if (!isObject(j.model)) return null;
    const before = j.model.type;
    const value = rng.pick(['WordLevel', 'Foo', '', 5, null, 'bpe', 'Unigram', 'WordPiece', undefined].filter((t) => t !== before));
    if (value === undefined) delete j.model.type;
    else j.model.type = value;
    return `model.type ${show(before)} -> ${value === undefined ? '(deleted)' : show(value)}`;
  }),
  edit('tokenizer/added-token-id', (j, rng) => {
    const tokens = added(j);
    if (tokens.length === 0) return null;
    const t = rng.pick(tokens);
    const before = t.id;
    t.id = rng.pick([-1, 1.5, '5', null, 2 ** 32, 2 ** 31, 1e9, raw('1e400'), raw('18446744073709551616'), 0, before + 1]);
    return `added token ${show(t.content)} id ${before} -> ${show(t.id)}`;
  }),
  edit('tokenizer/added-tokens-shape', (j, rng) => {
    const value = rng.pick([{}, 'x', null, [5], [null], [{}], [{ id: 0 }], [{ id: 0, content: 5 }], [{ id: 0, content: '' }]]);
    j.added_tokens = value;
    return `added_tokens = ${show(value)}`;
  }),
  edit('tokenizer/component-type', (j, rng) => {
    const key = rng.pick(['normalizer', 'pre_tokenizer', 'post_processor', 'decoder']);
    const value = rng.pick([{ type: 'Foo' }, {}, 5, 'x', [], null]);
    j[key] = value;
    return `${key} = ${show(value)}`;
  }),
  edit('tokenizer/vocab', (j, rng) => {
    if (!isObject(j.model)) return null;
    const key = rng.pick(['vocab', 'vocab', 'merges']);
    if (key === 'vocab' && isObject(j.model.vocab) && rng.chance(0.5)) {
      const word = rng.pick(Object.keys(j.model.vocab).slice(0, 500));
      const value = rng.pick([-1, 'x', 1.5, null, 2 ** 32]);
      j.model.vocab[word] = value;
      return `model.vocab[${show(word)}] = ${show(value)}`;
    }
    j.model[key] = otherType(rng, j.model[key]);
    return `model.${key} = ${show(j.model[key])}`;
  }),
];

// Mutations of tokenizer_config.json: chat templates that do not parse, raise, or have the wrong type (and valid
// ones, added to a checkpoint that had none), special tokens of the wrong type, other fields retyped.
import { show } from '../raw-json.mjs';
import { jsonEdit } from './edit.mjs';
import { otherType, randomKey } from './values.mjs';

const FILE = 'tokenizer_config.json';

/** A tokenizer_config mutation: edits the parsed object in place and says what it did. */
const edit = jsonEdit(FILE);

const VALID_TEMPLATE = '{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}';

export const tokenizerConfigMutations = [
  edit('tokenizer-config/chat-template', (j, rng) => {
    const value = rng.pick([
      '{% for m in messages %}{{ m.content }}', // unclosed block
      '{{ messages[0]. }}',
      '{% if %}x{% endif %}',
      '{{ raise_exception("this template refuses") }}',
      '{{ undefined_function() }}',
      '{{ messages[5].content }}',
      '',
      VALID_TEMPLATE,
      [{ name: 'default', template: VALID_TEMPLATE }],
      [{ name: 'default', template: 5 }],
      [{ name: 'tool_use' }],
      [],
      5,
      {},
      null,
    ]);
    j.chat_template = value;
    return `chat_template = ${show(value)}`;
  }),
  edit('tokenizer-config/special-token', (j, rng) => {
    const key = rng.pick(['eos_token', 'bos_token', 'pad_token', 'unk_token']);
    const value = rng.pick([5, { content: 5 }, [], true, '<|not a token|>', null, { content: '<|endoftext|>' }]);
    j[key] = value;
    return `${key} = ${show(value)}`;
  }),
  edit('tokenizer-config/retype-field', (j, rng) => {
    const key = rng.chance(0.5) ? rng.pick(['additional_special_tokens', 'clean_up_tokenization_spaces', 'add_bos_token',
      'model_max_length', 'added_tokens_decoder']) : randomKey(rng, j);
    if (key === undefined) return null;
    j[key] = otherType(rng, j[key]);
    return `${key} = ${show(j[key])}`;
  }),
  edit('tokenizer-config/delete-field', (j, rng) => {
    const key = randomKey(rng, j);
    if (key === undefined) return null;
    delete j[key];
    return `delete ${key}`;
  }),
];

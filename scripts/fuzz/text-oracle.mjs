// Rules for the files the TypeScript layer reads: tokenizer.json, tokenizer_config.json, generation_config.json.
// They follow what the Hugging Face libraries accept (the tokenizers crate's serde types, transformers' special
// tokens and chat templates) and what the engine reads from each file.
import { isInteger, isObject } from './strict-json.mjs';

/** Tokenizer models the engine's tokenizer library implements (it has no WordLevel). */
const MODEL_TYPES = ['BPE', 'WordPiece', 'Unigram'];
const SPECIAL_TOKENS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];
const U32 = 2 ** 32;

const show = (x) => {
  const t = JSON.stringify(x, (_k, val) => (typeof val === 'bigint' ? val.toString() : val)) ?? String(x);
  return t.length > 60 ? `${t.slice(0, 57)}...` : t;
};
const present = (o, k) => Object.hasOwn(o, k) && o[k] !== null;
const tokenText = (x) => typeof x === 'string' || (isObject(x) && typeof x.content === 'string');

/** @param {unknown} j - tokenizer.json, parsed */
export function checkTokenizer(j) {
  const out = [];
  const v = (kind, detail) => out.push({ kind, detail });
  if (!isObject(j)) return v('tokenizer-json', 'tokenizer.json is not a JSON object'), out;
  if (!isObject(j.model)) v('tokenizer-model', `model = ${show(j.model)} is not an object`);
  else if (!MODEL_TYPES.includes(j.model.type)) v('tokenizer-model', `model.type = ${show(j.model.type)} (implemented: ${MODEL_TYPES.join(', ')})`);
  if (present(j, 'added_tokens')) {
    if (!Array.isArray(j.added_tokens)) v('tokenizer-added-tokens', `added_tokens = ${show(j.added_tokens)} is not a list`);
    else
      j.added_tokens.forEach((t, i) => {
        if (!isObject(t) || typeof t.content !== 'string') v('tokenizer-added-tokens', `added_tokens[${i}] = ${show(t)} has no string content`);
        else if (!(isInteger(t.id) && t.id >= 0 && t.id < U32)) v('tokenizer-added-tokens', `added token ${show(t.content)} has id ${show(t.id)}, not a u32`);
      });
  }
  for (const k of ['normalizer', 'pre_tokenizer', 'post_processor', 'decoder'])
    if (present(j, k) && !isObject(j[k])) v('tokenizer-json', `${k} = ${show(j[k])} is not an object`);
  return out;
}

/** @param {unknown} c - tokenizer_config.json, parsed */
export function checkTokenizerConfig(c) {
  const out = [];
  const v = (kind, detail) => out.push({ kind, detail });
  if (!isObject(c)) return v('tokenizer-config', 'tokenizer_config.json is not a JSON object'), out;
  const t = c.chat_template;
  const named = (x) => isObject(x) && typeof x.name === 'string' && typeof x.template === 'string';
  if (present(c, 'chat_template') && typeof t !== 'string' && !(Array.isArray(t) && t.every(named)))
    v('tokenizer-config', `chat_template = ${show(t)} is neither a template nor a list of named ones`);
  for (const k of SPECIAL_TOKENS) if (present(c, k) && !tokenText(c[k])) v('tokenizer-config', `${k} = ${show(c[k])} is not a token`);
  const extra = c.additional_special_tokens;
  if (present(c, 'additional_special_tokens') && !(Array.isArray(extra) && extra.every(tokenText)))
    v('tokenizer-config', `additional_special_tokens = ${show(extra)} is not a list of tokens`);
  return out;
}

/** @param {unknown} g - generation_config.json, parsed */
export function checkGenerationConfig(g) {
  const out = [];
  const v = (kind, detail) => out.push({ kind, detail });
  if (!isObject(g)) return v('generation-config', 'generation_config.json is not a JSON object'), out;
  if (present(g, 'do_sample') && typeof g.do_sample !== 'boolean') v('generation-config', `do_sample = ${show(g.do_sample)}`);
  for (const k of ['temperature', 'top_k', 'top_p', 'min_p', 'repetition_penalty'])
    if (present(g, k) && typeof g[k] !== 'number') v('generation-config', `${k} = ${show(g[k])} is not a number`);
  if (present(g, 'eos_token_id') && !isInteger(g.eos_token_id) && !(Array.isArray(g.eos_token_id) && g.eos_token_id.every(isInteger)))
    v('generation-config', `eos_token_id = ${show(g.eos_token_id)} is not a token id or a list of them`);
  if (present(g, 'bos_token_id') && !isInteger(g.bos_token_id)) v('generation-config', `bos_token_id = ${show(g.bos_token_id)} is not a token id`);
  return out;
}

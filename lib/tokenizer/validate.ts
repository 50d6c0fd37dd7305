/**
 * Checks of tokenizer.json and tokenizer_config.json before the tokenizer library sees them. The library accepts
 * much that the Hugging Face `tokenizers` crate refuses (an unknown model type becomes a word-level "legacy" model,
 * an added token's id may be any value, a vocabulary id may be a string) and then tokenizes differently without a
 * word; these checks refuse such files with a {@link BadCheckpointError} that names the field.
 * @internal
 * @module
 */
import { BadCheckpointError } from '../errors.js';
import { show } from '../validation.js';

/** Tokenizer models the library implements (the crate's WordLevel is not among them). */
const MODEL_TYPES = ['BPE', 'WordPiece', 'Unigram'];
/** tokenizer_config.json keys whose value is a special token's text (or an AddedToken object). */
export const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
/** A token id as the crate stores it: a u32. */
const isU32 = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0 && (v as number) < 2 ** 32;
/** A special token as tokenizer_config.json gives it: a string, or an AddedToken object `{ content }`. */
export const isTokenText = (v: unknown): boolean => typeof v === 'string' || (isRecord(v) && typeof v.content === 'string');

function bad(file: string, what: string): never {
  throw new BadCheckpointError(`${file}: ${what}. Check that the file is complete and unmodified.`);
}

/**
 * Checks tokenizer.json's model and added tokens.
 * @returns the largest token id it defines plus one (the vocabulary's size as ids go), computed without walking
 * the library's id-indexed arrays, which an id near 2^32 would make four billion entries long.
 */
export function checkTokenizerJson(json: Record<string, unknown>, file: string): number {
  const model = json.model;
  if (!isRecord(model)) bad(file, `"model" must be an object, got ${show(model)}`);
  if (!MODEL_TYPES.includes(model.type as string)) {
    bad(file, `model.type is ${show(model.type)}; vtengine implements ${MODEL_TYPES.join(', ')} tokenizers`);
  }
  let size = 0;
  if (model.type === 'Unigram') {
    const vocab = model.vocab;
    const pair = (e: unknown): boolean => Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'number';
    if (!Array.isArray(vocab) || !vocab.every(pair)) bad(file, 'model.vocab of a Unigram model must be a list of [piece, score] pairs');
    size = vocab.length;
  } else {
    if (!isRecord(model.vocab)) bad(file, `model.vocab must be an object of token ids, got ${show(model.vocab)}`);
    for (const [token, id] of Object.entries(model.vocab)) {
      if (!isU32(id)) bad(file, `model.vocab gives ${show(token)} the id ${show(id)}, not an integer from 0 to 2^32 - 1`);
      size = Math.max(size, id + 1);
    }
  }
  const added = json.added_tokens;
  if (added === undefined || added === null) return size;
  if (!Array.isArray(added)) bad(file, `"added_tokens" must be a list, got ${show(added)}`);
  added.forEach((t: unknown, i) => {
    if (!isRecord(t) || typeof t.content !== 'string') bad(file, `added_tokens[${i}] must be an object with a string "content"`);
    if (!isU32(t.id)) bad(file, `added token ${show(t.content)} has the id ${show(t.id)}, not an integer from 0 to 2^32 - 1`);
    size = Math.max(size, t.id + 1);
  });
  return size;
}

/** Checks the tokenizer_config.json fields vtengine reads: special tokens and the chat template. */
export function checkTokenizerConfig(config: Record<string, unknown>, file: string): void {
  for (const key of SPECIAL_TOKEN_KEYS) {
    const v = config[key];
    if (v !== undefined && v !== null && !isTokenText(v)) bad(file, `"${key}" must be a token's text, got ${show(v)}`);
  }
  const extra = config.additional_special_tokens;
  if (extra !== undefined && extra !== null && !(Array.isArray(extra) && extra.every(isTokenText))) {
    bad(file, `"additional_special_tokens" must be a list of tokens' texts, got ${show(extra)}`);
  }
  const t = config.chat_template;
  const named = (x: unknown): boolean => isRecord(x) && typeof x.name === 'string' && typeof x.template === 'string';
  if (t !== undefined && t !== null && typeof t !== 'string' && !(Array.isArray(t) && t.every(named))) {
    bad(file, `"chat_template" must be a Jinja template or a list of { name, template }, got ${show(t)}`);
  }
}

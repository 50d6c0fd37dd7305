// A malformed tokenizer.json or tokenizer_config.json is refused with ERR_BAD_CHECKPOINT naming the field, where
// the tokenizer library would accept it and tokenize differently (an unknown model type became a word-level
// model; an added token's id could be anything) or fail with a TypeError. Found by scripts/fuzz-checkpoints.mjs.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { loadTokenizer } from '../../lib/tokenizer/tokenizer.js';

const MODEL = fileURLToPath(new URL('../../models/default', import.meta.url));
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The default model's tokenizer files, edited. */
function edited(editTokenizer: (j: Json) => void, editConfig: (c: Json) => void = () => {}): string {
  const d = mkdtempSync(join(tmpdir(), 'vt-tok-'));
  dirs.push(d);
  const j = JSON.parse(readFileSync(join(MODEL, 'tokenizer.json'), 'utf8')) as Json;
  const c = JSON.parse(readFileSync(join(MODEL, 'tokenizer_config.json'), 'utf8')) as Json;
  editTokenizer(j);
  editConfig(c);
  writeFileSync(join(d, 'tokenizer.json'), JSON.stringify(j));
  writeFileSync(join(d, 'tokenizer_config.json'), JSON.stringify(c));
  return d;
}

const firstAdded = (j: Json): Json => j.added_tokens[0] as Json;

describe('tokenizer.json checks', () => {
  it('the unedited files load', async () => {
    const tok = await loadTokenizer(edited(() => {}));
    expect(tok?.size).toBe(4096);
  });

  it.each([
    ['an unknown model type', (j: Json) => (j.model.type = 'Foo'), /model\.type/],
    ['a WordLevel model (not implemented by the library)', (j: Json) => (j.model.type = 'WordLevel'), /model\.type/],
    ['no model type', (j: Json) => delete j.model.type, /model\.type/],
    ['no model', (j: Json) => delete j.model, /"model"/],
    ['a vocabulary id that is a string', (j: Json) => (j.model.vocab[Object.keys(j.model.vocab)[5]] = '5'), /model\.vocab/],
    ['a negative vocabulary id', (j: Json) => (j.model.vocab[Object.keys(j.model.vocab)[5]] = -1), /model\.vocab/],
    ['a vocabulary that is a list', (j: Json) => (j.model.vocab = []), /model\.vocab/],
    ['added_tokens that is an object', (j: Json) => (j.added_tokens = {}), /added_tokens/],
    ['an added token without content', (j: Json) => (j.added_tokens = [{ id: 0 }]), /added_tokens\[0\]/],
    ['a fractional added-token id', (j: Json) => (firstAdded(j).id = 1.5), /id 1\.5/],
    ['a negative added-token id', (j: Json) => (firstAdded(j).id = -1), /id -1/],
    ['an added-token id that is a string', (j: Json) => (firstAdded(j).id = '5'), /id "5"/],
    ['an added-token id past u32', (j: Json) => (firstAdded(j).id = 2 ** 32), /id 4294967296/],
  ])('refuses %s', async (_what, edit, message) => {
    await expect(loadTokenizer(edited(edit))).rejects.toMatchObject({ code: 'ERR_BAD_CHECKPOINT', message });
  });

  it('sizes the vocabulary from the largest id without walking to it', async () => {
    // The library indexes its vocabulary array by id, and the size used to be counted over that array: 7.6 s
    // for an added id of 10^8 on this machine, minutes near 2^32. The id is valid (a u32), so the tokenizer loads;
    // ids it does not define decode to nothing.
    const tok = await loadTokenizer(edited((j) => (firstAdded(j).id = 2 ** 32 - 2)));
    expect(tok?.size).toBe(2 ** 32 - 1);
    expect(tok?.decode([5, 2 ** 32], false)).toBe(tok?.decode([5], false));
  });

  it('refuses a tokenizer.json that is not UTF-8', async () => {
    const d = edited(() => {});
    const bytes = readFileSync(join(d, 'tokenizer.json'));
    writeFileSync(join(d, 'tokenizer.json'), Buffer.concat([bytes.subarray(0, 40), Buffer.from([0xff]), bytes.subarray(40)]));
    await expect(loadTokenizer(d)).rejects.toMatchObject({ code: 'ERR_BAD_CHECKPOINT', message: /UTF-8/ });
  });
});

describe('tokenizer_config.json checks', () => {
  const noEdit = (): void => {};
  it.each([
    ['a chat_template that is a number', (c: Json) => (c.chat_template = 5), /chat_template/],
    ['a chat_template that is an object', (c: Json) => (c.chat_template = {}), /chat_template/],
    ['a named template without text', (c: Json) => (c.chat_template = [{ name: 'default', template: 5 }]), /chat_template/],
    ['an eos_token that is a number', (c: Json) => (c.eos_token = 5), /"eos_token"/],
    ['a bos_token whose content is not text', (c: Json) => (c.bos_token = { content: 5 }), /"bos_token"/],
    ['additional_special_tokens that is a string', (c: Json) => (c.additional_special_tokens = 'x'), /additional_special_tokens/],
  ])('refuses %s', async (_what, edit, message) => {
    await expect(loadTokenizer(edited(noEdit, edit))).rejects.toMatchObject({ code: 'ERR_BAD_CHECKPOINT', message });
  });

  it('accepts null special tokens, AddedToken objects and a list of named templates', async () => {
    const template = '{% for m in messages %}{{ m.content }}{% endfor %}';
    const tok = await loadTokenizer(
      edited(noEdit, (c) => {
        c.pad_token = null;
        c.eos_token = { content: '<|endoftext|>' };
        c.chat_template = [{ name: 'tool_use', template: 'x' }, { name: 'default', template }];
      }),
    );
    expect(tok?.chatTemplate).toBe(template);
    expect(tok?.specialToken('eos_token')).toBe('<|endoftext|>');
  });
});


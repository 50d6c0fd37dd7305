// Chat templates rendered with @huggingface/jinja against transformers' apply_chat_template(tokenize=False), and
// the ids transformers feeds the model for them (tokenized without adding special tokens again).
import { beforeAll, describe, expect, it } from 'vitest';
import { NoChatTemplateError, InvalidOptionError } from '../../lib/errors.js';
import { TextLayer } from '../../lib/tokenizer/text-layer.js';
import { readChatCases, readTokenizerReference, templateOptions, tokenizerDir } from '../helpers/tokenizers.js';

const cases = readChatCases();

describe.each(['qwen3', 'llama3'])('chat template of %s', (name) => {
  const ref = readTokenizerReference(name);
  let text: TextLayer;
  beforeAll(async () => {
    text = (await TextLayer.load(tokenizerDir(name)))!;
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s renders as transformers does', (caseName, c) => {
    const want = ref.chat.find((r) => r.name === caseName)!;
    expect(want.error).toBeUndefined();
    const rendered = text.applyChatTemplate(c.messages, templateOptions(c.options));
    expect(rendered).toBe(want.rendered);
    expect(text.tokenize(rendered, false)).toEqual(want.ids);
  });
});

describe('chat template edge cases', () => {
  it('Qwen3: enable_thinking=false adds the empty think block, a system message comes first', async () => {
    const text = (await TextLayer.load(tokenizerDir('qwen3')))!;
    const messages = [{ role: 'system', content: 'S' }, { role: 'user', content: 'U' }];
    const off = text.applyChatTemplate(messages, { addGenerationPrompt: true, enable_thinking: false });
    expect(off).toBe('<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
    expect(text.applyChatTemplate(messages)).toBe('<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n');
  });

  it('a tokenizer without a template throws NoChatTemplateError', async () => {
    const text = (await TextLayer.load(tokenizerDir('mistral')))!;
    expect(text.hasChatTemplate).toBe(false);
    expect(() => text.applyChatTemplate([{ role: 'user', content: 'hi' }])).toThrow(NoChatTemplateError);
    expect(readTokenizerReference('mistral').chat.every((c) => c.error !== undefined)).toBe(true);
  });

  it('rejects malformed messages and options with InvalidOptionError', async () => {
    const text = (await TextLayer.load(tokenizerDir('qwen3')))!;
    for (const bad of [[], 'hi', [null], [{ content: 'x' }], [{ role: 'user', content: 5 }]]) {
      expect(() => text.applyChatTemplate(bad as never)).toThrow(InvalidOptionError);
    }
    expect(() => text.applyChatTemplate([{ role: 'user', content: 'x' }], { addGenerationPrompt: 'yes' })).toThrow(/boolean/);
  });

  it('the default stop ids add the tokenizer EOS and the end-of-turn token its template writes', async () => {
    const qwen = (await TextLayer.load(tokenizerDir('qwen3')))!;
    const imEnd = qwen.tokenizer.tokenId('<|im_end|>')!;
    expect(qwen.stopTokenIds([151643])).toEqual([151643, imEnd]);
    const llama = (await TextLayer.load(tokenizerDir('llama3')))!;
    const eot = llama.tokenizer.tokenId('<|eot_id|>')!;
    const eotext = llama.tokenizer.tokenId('<|end_of_text|>')!;
    expect(llama.stopTokenIds([eotext]).sort()).toEqual([eotext, eot].sort());
  });
});

// Chat templates rendered with @huggingface/jinja against transformers' apply_chat_template(tokenize=False), and
// the ids of the renderings (tokenized without adding special tokens again): those transformers feeds the model,
// and, where transformers does not follow tokenizer.json (cl100k: see TRANSFORMERS_DIFFERS), the tokenizers library's.
import { beforeAll, describe, expect, it } from 'vitest';
import { ChatTemplate } from '../../lib/chat/template.js';
import { NoChatTemplateError, InvalidOptionError } from '../../lib/errors.js';
import { TextLayer } from '../../lib/tokenizer/text-layer.js';
import {
  TRANSFORMERS_DIFFERS,
  readChatCases,
  readTokenizerReference,
  referenceOrFailingTest,
  templateOptions,
  tokenizerDir,
} from '../helpers/tokenizers.js';

const cases = readChatCases();

// Qwen3: a full template (tools, thinking, namespace, string methods); cl100k: plain ChatML.
describe.each(['qwen3', 'cl100k'])('chat template of %s', (name) => {
  const ref = referenceOrFailingTest(name);
  if (ref === undefined) return;
  const mayDiffer = TRANSFORMERS_DIFFERS[name];
  let text: TextLayer;
  beforeAll(async () => {
    text = (await TextLayer.load(tokenizerDir(name)))!;
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s renders as transformers does', (caseName, c) => {
    const want = ref.chat.find((r) => r.name === caseName)!;
    expect(want.error).toBeUndefined();
    const rendered = text.applyChatTemplate(c.messages, templateOptions(c.options));
    expect(rendered).toBe(want.rendered);
    const ids = text.tokenize(rendered, false);
    if (mayDiffer === undefined) {
      expect(ids).toEqual(want.ids);
      return;
    }
    // transformers rebuilds this tokenizer's pre-tokenizer: the tokenizers library's ids are the reference, and
    // transformers' must agree wherever its regex cuts the rendering as tokenizer.json's does.
    expect(want.ids_tokenizers, 'reference.json without ids_tokenizers: rerun scripts/make_tokenizer_refs.py').toBeDefined();
    expect(ids).toEqual(want.ids_tokenizers);
    const specials = [...text.tokenizer.specialIds].map((id) => text.detokenize([id], false));
    if (!mayDiffer(rendered, specials)) expect(ids).toEqual(want.ids);
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

  it('refuses image and video parts (the vision tower is never loaded), naming the part', async () => {
    const text = (await TextLayer.load(tokenizerDir('qwen3')))!;
    for (const type of ['image', 'image_url', 'video', 'input_image']) {
      const messages = [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type, image: 'x.png' }] }];
      expect(() => text.applyChatTemplate(messages as never)).toThrow(InvalidOptionError);
      expect(() => text.applyChatTemplate(messages as never)).toThrow(/content\[1\] is ".*": .*cannot see images or video/);
    }
  });

  it('the default stop ids add the tokenizer EOS and the end-of-turn token its template writes', async () => {
    const qwen = (await TextLayer.load(tokenizerDir('qwen3')))!;
    const imEnd = qwen.tokenizer.tokenId('<|im_end|>')!;
    expect(qwen.stopTokenIds([151643])).toEqual([151643, imEnd]);
    // cl100k: no model EOS given; tokenizer_config.json's eos_token (<|endoftext|>) and the template's <|im_end|>.
    const cl100k = (await TextLayer.load(tokenizerDir('cl100k')))!;
    const endOfText = cl100k.tokenizer.tokenId('<|endoftext|>')!;
    const clImEnd = cl100k.tokenizer.tokenId('<|im_end|>')!;
    expect([endOfText, clImEnd]).toEqual([100257, 100265]);
    expect(cl100k.stopTokenIds([]).sort()).toEqual([endOfText, clImEnd].sort());
  });

  it("a template sees tokenizer_config.json's special tokens as variables; `| trim` binds before `+`", async () => {
    // What the Llama 3 template used (bos_token, `content | trim` inside a concatenation, loop.index0, set); the
    // expected strings are what transformers 5.17 renders for this template with the cl100k tokenizer.
    const cl100k = (await TextLayer.load(tokenizerDir('cl100k')))!;
    const source =
      "{% for m in messages %}{% set text = '<|im_start|>' + m['role'] + '\\n' + m['content'] | trim + '<|im_end|>\\n' %}" +
      '{% if loop.index0 == 0 %}{% set text = bos_token + text %}{% endif %}{{ text }}{% endfor %}' +
      "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}{{ eos_token if not add_generation_prompt else '' }}";
    const template = new ChatTemplate(source, (key) => cl100k.tokenizer.specialToken(key), []);
    const messages = [{ role: 'system', content: '  Be brief. \n' }, { role: 'user', content: '\tHi!\n\n' }];
    const body = '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n';
    expect(template.render(messages, { addGenerationPrompt: true })).toBe(`<|endoftext|>${body}<|im_start|>assistant\n`);
    expect(template.render(messages)).toBe(`<|endoftext|>${body}<|endoftext|>`);
  });
});

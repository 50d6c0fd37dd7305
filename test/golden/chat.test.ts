// The qwen3-tok fixture (a tiny random Qwen3 with the real Qwen3 tokenizer, scripts/make_fixtures.py --only
// qwen3-tok): from the same { messages } input, our engine renders the same prompt, tokenizes it to the same ids and
// generates the same greedy ids and text as transformers (float64 reference).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadCheckpointError, Engine, NoTokenizerError } from '../../lib/index.js';
import type { ChatMessage } from '../../lib/index.js';
import { copyCheckpoint, removeTempDirs } from '../helpers/checkpoints.js';
import { fixtureDir, readReference } from '../helpers/fixtures.js';

interface ChatRef {
  messages: ChatMessage[];
  options: { add_generation_prompt: boolean; enable_thinking: boolean };
  rendered: string;
  ids: number[];
  greedy_text: string;
}

const ref = readReference('qwen3-tok') as ReturnType<typeof readReference> & { chat: ChatRef };
const greedy = ref.prompts[0].greedy;

describe('qwen3-tok: chat in, text out, as transformers', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.load(fixtureDir('qwen3-tok'), { device: 'cpu', threads: 2 });
  });
  afterAll(async () => {
    await engine?.dispose();
    removeTempDirs();
  });

  it('renders the messages and tokenizes the prompt as transformers', () => {
    const { add_generation_prompt, enable_thinking } = ref.chat.options;
    const rendered = engine.applyChatTemplate(ref.chat.messages, { addGenerationPrompt: add_generation_prompt, enable_thinking });
    expect(rendered).toBe(ref.chat.rendered);
    expect(engine.tokenize(rendered, { special: false })).toEqual(ref.chat.ids);
    expect(engine.tokenize(rendered)).toEqual(ref.chat.ids); // Qwen's post-processor adds nothing
    expect(engine.detokenize(ref.chat.ids)).toBe(rendered);
  });

  it('generates the greedy ids and text of transformers from { messages }', async () => {
    const gen = engine.generate(
      { messages: ref.chat.messages, templateVars: { enable_thinking: ref.chat.options.enable_thinking } },
      { maxTokens: greedy.length },
    );
    const texts: string[] = [];
    for await (const chunk of gen) texts.push(chunk.text!);
    const result = await gen;
    expect(result.usage.promptTokens).toBe(ref.chat.ids.length);
    expect(result.tokenIds).toEqual(greedy);
    expect(result.finishReason).toBe('length');
    expect(result.text).toBe(ref.chat.greedy_text);
    expect(texts.join('')).toBe(result.text);
  });

  it('{ prompt } with the rendered text gives the same ids as { messages }', async () => {
    const result = await engine.generate({ prompt: ref.chat.rendered }, { maxTokens: 4 });
    expect(result.usage.promptTokens).toBe(ref.chat.ids.length);
    expect(result.tokenIds).toEqual(greedy.slice(0, 4));
  });

  it('a stop string spanning two tokens ends the generation before it', async () => {
    const first = engine.detokenize(greedy.slice(0, 1));
    const second = engine.detokenize(greedy.slice(1, 2));
    // The stop string starts inside the first token's text and ends inside the second's.
    const stop = first.slice(-3) + second.slice(0, 3);
    const full = engine.detokenize(greedy);
    const result = await engine.generate({ messages: ref.chat.messages, templateVars: { enable_thinking: false } }, { maxTokens: 24, stop: [stop] });
    expect(result.finishReason).toBe('stop');
    expect(result.text).toBe(full.slice(0, full.indexOf(stop)));
    expect(result.tokenIds).toEqual(greedy.slice(0, 2));
  });

  it('stops by default at the tokenizer EOS and the template end-of-turn (<|im_end|>) too', () => {
    const imEnd = engine.tokenize('<|im_end|>')[0];
    expect(engine.modelInfo.eosTokenIds).toContain(imEnd);
    expect(engine.modelInfo.eosTokenIds).toContain(151643);
  });

  it('the tokenizer EOS joins the stop ids even when generation_config.json names another', async () => {
    const dir = copyCheckpoint(fixtureDir('qwen3-tok'));
    const gc = JSON.parse(readFileSync(join(dir, 'generation_config.json'), 'utf8'));
    writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ ...gc, eos_token_id: [151643] }));
    const other = await Engine.load(dir, { device: 'cpu', threads: 1 });
    try {
      expect([...other.modelInfo.eosTokenIds].sort()).toEqual([151643, 151645]);
    } finally {
      await other.dispose();
    }
  });

  it('logitBias reaches the sampler: a forbidden greedy token gives way to another', async () => {
    const biased = await engine.generate({ tokens: ref.chat.ids }, { maxTokens: 1, logitBias: { [greedy[0]]: -1000 } });
    expect(biased.tokenIds[0]).not.toBe(greedy[0]);
  });

  it('rejects a broken tokenizer.json at load with BadCheckpointError', async () => {
    const dir = copyCheckpoint(fixtureDir('qwen3-tok'));
    writeFileSync(join(dir, 'tokenizer.json'), '{"truncated": ');
    await expect(Engine.load(dir, { device: 'cpu', threads: 1 })).rejects.toThrow(BadCheckpointError);
  });
});

describe('an engine without a tokenizer', () => {
  let engine: Engine;
  beforeAll(async () => {
    engine = await Engine.load(fixtureDir('qwen2-f16'), { device: 'cpu', threads: 1 });
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it('still generates from tokens, with no text', async () => {
    const result = await engine.generate({ tokens: [5, 6, 7] }, { maxTokens: 2 });
    expect(result.tokenIds).toHaveLength(2);
    expect(result.text).toBeUndefined();
  });

  it('throws NoTokenizerError from every text method', () => {
    const calls = [
      () => engine.tokenize('hi'),
      () => engine.detokenize([1]),
      () => engine.applyChatTemplate([{ role: 'user', content: 'hi' }]),
      () => engine.generate({ prompt: 'hi' }),
      () => engine.generate({ messages: [{ role: 'user', content: 'hi' }] }),
      () => engine.generate({ tokens: [1] }, { stop: ['x'] }),
    ];
    for (const call of calls) {
      expect(call).toThrow(NoTokenizerError);
      try {
        call();
      } catch (err) {
        expect((err as NoTokenizerError).code).toBe('ERR_NO_TOKENIZER');
        expect((err as Error).message).toMatch(/tokenizer\.json/);
      }
    }
  });
});

// The OpenAI-compatible server (lib/server), driven by the official `openai` client as any application would drive
// it, against engines on the CPU: the packaged default model (text completions) and qwen3-tok (a chat template).
// Every expected value comes from the same engine called directly through the SDK, so the tests check that the server
// adds nothing and loses nothing: the text, the finish reason, the usage and the logprobs.
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { Engine, type GenerateOptions, type MessagesInput } from '../../lib/index.js';
import { type Server, createServer } from '../../lib/server/index.js';
import { fixtureDir } from '../helpers/fixtures.js';

const PROMPTS = [
  'def fibonacci(n):',
  'import os\n',
  'class Stack:',
  'for i in range(10):',
  'with open(path) as f:',
  'x = [',
  '# Compute the mean',
  'return',
];
const MESSAGES = [
  { role: 'system' as const, content: 'Be brief.' },
  { role: 'user' as const, content: 'Name three primes.' },
];

let code: Engine; // the default model: text completions
let chat: Engine; // qwen3-tok: a real Qwen3 tokenizer and chat template
const servers: Server[] = [];
let codeClient: OpenAI;
let chatClient: OpenAI;

async function serve(engine: Engine, modelName: string, apiKey?: string): Promise<string> {
  const server = createServer(engine, { port: 0, modelName, apiKey });
  servers.push(server);
  return (await server.listen()).url;
}

function client(baseURL: string, apiKey = 'unused'): OpenAI {
  // No retries: a failure must show as it is, not be retried away.
  return new OpenAI({ baseURL, apiKey, maxRetries: 0 });
}

/** The thrown error of `run`, which must be an APIError. */
async function apiError(run: () => Promise<unknown>): Promise<APIError> {
  try {
    await run();
  } catch (err) {
    expect(err).toBeInstanceOf(APIError);
    return err as APIError;
  }
  throw new Error('expected the request to fail');
}

/** The engine's idle state: no request queued or running, no KV block held. */
function idle(engine: Engine): { running: number; waiting: number; kvBlocksUsed: number } {
  const s = engine.stats();
  return { running: s.requestsRunning, waiting: s.requestsWaiting, kvBlocksUsed: s.kvBlocksUsed };
}

beforeAll(async () => {
  [code, chat] = await Promise.all([
    Engine.load({ device: 'cpu', threads: 2 }),
    Engine.load(fixtureDir('qwen3-tok'), { device: 'cpu', threads: 2 }),
  ]);
  codeClient = client(await serve(code, 'code'));
  chatClient = client(await serve(chat, 'chat'));
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await Promise.all([code?.dispose(), chat?.dispose()]);
});

describe('models', () => {
  it('lists the one model served and retrieves it; another id is a 404', async () => {
    const list = await codeClient.models.list();
    expect(list.data.map((m) => m.id)).toEqual(['code']);
    expect(list.data[0]).toMatchObject({ object: 'model', owned_by: 'vtengine' });
    expect(await codeClient.models.retrieve('code')).toMatchObject({ id: 'code', object: 'model' });
    const err = await apiError(() => codeClient.models.retrieve('gpt-4o'));
    expect(err.status).toBe(404);
    expect(err.code).toBe('model_not_found');
  });
});

describe('completions', () => {
  it('greedy: the text, finish reason and usage are the engine\'s own', async () => {
    const expected = await code.generate({ prompt: PROMPTS[0] }, { maxTokens: 24, temperature: 0 });
    const got = await codeClient.completions.create({ model: 'code', prompt: PROMPTS[0], max_tokens: 24, temperature: 0 });
    expect(got.object).toBe('text_completion');
    expect(got.model).toBe('code');
    expect(got.choices).toHaveLength(1);
    expect(got.choices[0].text).toBe(expected.text);
    expect(got.choices[0].finish_reason).toBe(expected.finishReason === 'length' ? 'length' : 'stop');
    expect(got.usage).toEqual({
      prompt_tokens: expected.usage.promptTokens,
      completion_tokens: expected.usage.completionTokens,
      total_tokens: expected.usage.promptTokens + expected.usage.completionTokens,
    });
    expect(expected.usage.promptTokens).toBe(code.tokenize(PROMPTS[0]).length);
  });

  it('streamed: the chunks add up to the non-streamed text; include_usage adds a last chunk with the usage', async () => {
    const whole = await codeClient.completions.create({ model: 'code', prompt: PROMPTS[1], max_tokens: 32, temperature: 0 });
    const stream = await codeClient.completions.create({
      model: 'code',
      prompt: PROMPTS[1],
      max_tokens: 32,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(2);
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.text)).join('');
    expect(text).toBe(whole.choices[0].text);
    const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null);
    expect(finishes).toEqual([whole.choices[0].finish_reason]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(whole.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it('a prompt of token ids is continued as the engine continues it', async () => {
    const ids = code.tokenize(PROMPTS[2]);
    const expected = await code.generate({ tokens: ids }, { maxTokens: 16, temperature: 0 });
    const got = await codeClient.completions.create({ model: 'code', prompt: ids, max_tokens: 16, temperature: 0 });
    expect(got.choices[0].text).toBe(expected.text);
    expect(got.usage?.prompt_tokens).toBe(ids.length);
  });

  it('stop, as a string or an array, cuts the text before the first stop string', async () => {
    const free = (await code.generate({ prompt: PROMPTS[3] }, { maxTokens: 40, temperature: 0 })).text!;
    const stop = free.slice(12, 15); // three characters from inside the greedy text
    const expected = free.slice(0, free.indexOf(stop));
    for (const s of [stop, [stop, '\u0000never']]) {
      const got = await codeClient.completions.create({ model: 'code', prompt: PROMPTS[3], max_tokens: 40, temperature: 0, stop: s });
      expect(got.choices[0].text).toBe(expected);
      expect(got.choices[0].finish_reason).toBe('stop');
    }
  });

  it('seed: sampling with the same seed gives the engine\'s tokens for that seed', async () => {
    const options: GenerateOptions = { maxTokens: 20, temperature: 1, topP: 0.9, seed: 1234 };
    const expected = await code.generate({ prompt: PROMPTS[4] }, options);
    const request = { model: 'code', prompt: PROMPTS[4], max_tokens: 20, temperature: 1, top_p: 0.9, seed: 1234 };
    const [a, b] = await Promise.all([codeClient.completions.create(request), codeClient.completions.create(request)]);
    expect(a.choices[0].text).toBe(expected.text);
    expect(b.choices[0].text).toBe(expected.text);
  });

  it('logprobs (an integer): each token\'s logprob and its top alternatives, as the engine computes them', async () => {
    const expected = await code.generate({ prompt: PROMPTS[5] }, { maxTokens: 8, temperature: 0, logprobs: 3 });
    const got = await codeClient.completions.create({ model: 'code', prompt: PROMPTS[5], max_tokens: 8, temperature: 0, logprobs: 3 });
    const lp = got.choices[0].logprobs!;
    const eos = new Set(code.modelInfo.eosTokenIds);
    const reported = expected.logprobs!.filter((l) => !eos.has(l.tokenId));
    expect(lp.tokens).toEqual(reported.map((l) => code.detokenize([l.tokenId])));
    expect(lp.token_logprobs).toEqual(reported.map((l) => l.logprob));
    expect(lp.top_logprobs!.map((t) => Object.values(t).length)).toEqual(reported.map(() => 3));
    expect(lp.top_logprobs!.map((t) => Math.max(...Object.values(t)))).toEqual(reported.map((l) => l.top[0].logprob));
    const offsets = lp.text_offset!;
    expect(offsets[0]).toBe(0);
    for (let i = 1; i < offsets.length; i++) expect(offsets[i]).toBe(offsets[i - 1] + lp.tokens![i - 1].length);
  });
});

describe('chat completions', () => {
  const input: MessagesInput = { messages: MESSAGES, templateVars: { enable_thinking: false } };
  const request = { model: 'chat', messages: MESSAGES, max_tokens: 12, temperature: 0, chat_template_kwargs: { enable_thinking: false } };

  it('greedy: the reply is the engine\'s generate({ messages }) with the chat template, usage included', async () => {
    const expected = await chat.generate(input, { maxTokens: 12, temperature: 0 });
    const got = await chatClient.chat.completions.create(request);
    expect(got.object).toBe('chat.completion');
    expect(got.choices[0].message.role).toBe('assistant');
    expect(got.choices[0].message.content).toBe(expected.text);
    expect(got.choices[0].finish_reason).toBe(expected.finishReason === 'length' ? 'length' : 'stop');
    expect(got.usage).toMatchObject({ prompt_tokens: expected.usage.promptTokens, completion_tokens: expected.usage.completionTokens });
    const rendered = chat.applyChatTemplate(MESSAGES, { addGenerationPrompt: true, enable_thinking: false });
    expect(got.usage?.prompt_tokens).toBe(chat.tokenize(rendered, { special: false }).length);
  });

  it('streamed: a role chunk, then deltas that add up to the non-streamed reply, then the finish and the usage', async () => {
    const whole = await chatClient.chat.completions.create(request);
    const stream = await chatClient.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0].object).toBe('chat.completion.chunk');
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).join('');
    expect(text).toBe(whole.choices[0].message.content);
    const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null);
    expect(finishes).toEqual([whole.choices[0].finish_reason]);
    expect(chunks.at(-1)!.usage).toEqual(whole.usage);
  });

  it('max_completion_tokens limits the reply as max_tokens does; disagreeing values are refused', async () => {
    const { max_tokens: _, ...rest } = request;
    const got = await chatClient.chat.completions.create({ ...rest, max_completion_tokens: 5 });
    expect(got.usage?.completion_tokens).toBe(5);
    expect(got.choices[0].finish_reason).toBe('length');
    const err = await apiError(() => chatClient.chat.completions.create({ ...rest, max_completion_tokens: 5, max_tokens: 6 }));
    expect(err.status).toBe(400);
  });

  it('logprobs with top_logprobs: token texts, bytes and values as the engine computes them, streamed too', async () => {
    const expected = await chat.generate(input, { maxTokens: 6, temperature: 0, logprobs: 2 });
    const got = await chatClient.chat.completions.create({ ...request, max_tokens: 6, logprobs: true, top_logprobs: 2 });
    const content = got.choices[0].logprobs!.content!;
    const eos = new Set(chat.modelInfo.eosTokenIds);
    const reported = expected.logprobs!.filter((l) => !eos.has(l.tokenId));
    expect(content.map((c) => c.token)).toEqual(reported.map((l) => chat.detokenize([l.tokenId])));
    expect(content.map((c) => c.logprob)).toEqual(reported.map((l) => l.logprob));
    expect(content.map((c) => Buffer.from(c.bytes!).toString('utf8'))).toEqual(content.map((c) => c.token));
    expect(content.map((c) => c.top_logprobs.map((t) => t.logprob))).toEqual(reported.map((l) => l.top.map((t) => t.logprob)));

    const stream = await chatClient.chat.completions.create({ ...request, max_tokens: 6, logprobs: true, top_logprobs: 2, stream: true });
    const streamed = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(streamed).toEqual(content);
  });
});

describe('serving many clients', () => {
  it('16 concurrent requests, streamed and not, each get what the engine gives that request alone', async () => {
    const expected = [];
    for (const prompt of PROMPTS) expected.push((await code.generate({ prompt }, { maxTokens: 20, temperature: 0 })).text);
    const requests = Array.from({ length: 16 }, async (_, i) => {
      const prompt = PROMPTS[i % PROMPTS.length];
      if (i % 2 === 0) return (await codeClient.completions.create({ model: 'code', prompt, max_tokens: 20, temperature: 0 })).choices[0].text;
      const stream = await codeClient.completions.create({ model: 'code', prompt, max_tokens: 20, temperature: 0, stream: true });
      let text = '';
      for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
      return text;
    });
    const texts = await Promise.all(requests);
    expect(texts).toEqual(Array.from({ length: 16 }, (_, i) => expected[i % PROMPTS.length]));
    expect(idle(code)).toEqual({ running: 0, waiting: 0, kvBlocksUsed: 0 });
  });

  it('a client that aborts mid-stream ends its generation in the engine, and the server keeps serving', async () => {
    const maxTokens = code.modelInfo.maxContext - 64;
    // End-of-sequence banned, so only the abort can end it before maxTokens.
    const noEos = Object.fromEntries(code.modelInfo.eosTokenIds.map((id) => [String(id), -100]));
    const before = code.stats().tokensGenerated;
    const controller = new AbortController();
    const stream = await codeClient.completions.create(
      { model: 'code', prompt: PROMPTS[6], max_tokens: maxTokens, temperature: 0, logit_bias: noEos, stream: true },
      { signal: controller.signal },
    );
    let received = 0;
    // The client ends its iteration quietly when its own signal aborts it.
    for await (const chunk of stream) {
      received += chunk.choices.length;
      if (received === 3) controller.abort();
    }
    expect(received).toBe(3);
    expect(controller.signal.aborted).toBe(true);
    await vi.waitFor(() => expect(idle(code)).toEqual({ running: 0, waiting: 0, kvBlocksUsed: 0 }), { timeout: 30_000 });
    expect(code.stats().tokensGenerated - before).toBeLessThan(maxTokens);

    const next = await codeClient.completions.create({ model: 'code', prompt: PROMPTS[0], max_tokens: 8, temperature: 0 });
    expect(next.choices[0].text).toBe((await code.generate({ prompt: PROMPTS[0] }, { maxTokens: 8, temperature: 0 })).text);
  });
});

describe('errors in the OpenAI shape', () => {
  it.each([
    ['temperature', { temperature: -1 }],
    ['top_p', { top_p: 1.5 }],
    ['n', { n: 2 }],
    ['max_tokens', { max_tokens: 0 }],
    ['seed', { seed: 1.5 }],
    ['stop', { stop: [''] }],
    ['logprobs', { logprobs: 99 }],
  ])('a bad %s is a 400 naming it', async (param, bad) => {
    const err = await apiError(() => codeClient.completions.create({ model: 'code', prompt: 'x', max_tokens: 4, ...bad }));
    expect(err.status).toBe(400);
    expect(err.type).toBe('invalid_request_error');
    expect(err.param).toBe(param);
    expect(err.message).toContain(param);
  });

  it('top_logprobs without logprobs, and an unknown argument, are 400s', async () => {
    const topOnly = await apiError(() => chatClient.chat.completions.create({ model: 'chat', messages: MESSAGES, top_logprobs: 2 }));
    expect([topOnly.status, topOnly.param]).toEqual([400, 'top_logprobs']);
    const body = { model: 'chat', messages: MESSAGES, max_tokens: 2, frobnicate: true } as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming;
    const unknown = await apiError(() => chatClient.chat.completions.create(body));
    expect([unknown.status, unknown.param, unknown.code]).toEqual([400, 'frobnicate', 'unknown_parameter']);
  });

  it('an unknown model is a 404; tools are refused with a 400', async () => {
    const model = await apiError(() => chatClient.chat.completions.create({ model: 'gpt-4o', messages: MESSAGES }));
    expect([model.status, model.code, model.param]).toEqual([404, 'model_not_found', 'model']);
    const tools = await apiError(() =>
      chatClient.chat.completions.create({
        model: 'chat',
        messages: MESSAGES,
        tools: [{ type: 'function', function: { name: 'f', parameters: {} } }],
      }),
    );
    expect([tools.status, tools.param]).toEqual([400, 'tools']);
  });

  it('chat on a model without a chat template is a 400 that points to /v1/completions', async () => {
    const err = await apiError(() => codeClient.chat.completions.create({ model: 'code', messages: MESSAGES }));
    expect([err.status, err.code, err.param]).toEqual([400, 'ERR_NO_CHAT_TEMPLATE', 'messages']);
    expect(err.message).toContain('/v1/completions');
  });

  it('a prompt longer than the context is a 400 context_length_exceeded', async () => {
    const long = Array.from({ length: code.modelInfo.maxContext }, () => 5);
    const err = await apiError(() => codeClient.completions.create({ model: 'code', prompt: long, max_tokens: 4 }));
    expect([err.status, err.code, err.param]).toEqual([400, 'context_length_exceeded', 'prompt']);
  });
});

describe('API key', () => {
  let keyed: string;
  beforeAll(async () => {
    keyed = await serve(code, 'code', 'sk-test-0123456789');
  });

  it('the right bearer key is served; a wrong or missing one gets a 401', async () => {
    const ok = await client(keyed, 'sk-test-0123456789').completions.create({ model: 'code', prompt: 'x', max_tokens: 2 });
    expect(ok.choices).toHaveLength(1);
    const wrong = await apiError(() => client(keyed, 'sk-wrong').models.list());
    expect([wrong.status, wrong.code, wrong.type]).toEqual([401, 'invalid_api_key', 'invalid_request_error']);
    const missing = await fetch(`${keyed}/models`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer');
    expect(await missing.json()).toMatchObject({ error: { code: 'invalid_api_key', param: null, type: 'invalid_request_error' } });
  });

  it('GET /health needs no key', async () => {
    const res = await fetch(keyed.replace(/\/v1$/, '/health'));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: 'ok' });
  });
});

/**
 * `POST /v1/chat/completions`: a chat rendered with the model's chat template, as `engine.generate({ messages })`
 * renders it, answered as `chat.completion` (or streamed as `chat.completion.chunk`s).
 * @internal
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GenerationChunk, GenerationResult } from '../generation/result.js';
import { ApiError, badParam } from './api-error.js';
import { chatMessages } from './chat-messages.js';
import { type CompletionShape, finishReasonOf, runCompletion } from './completion-run.js';
import type { ServerContext } from './context.js';
import { type TokenTexts, reportedLogprobs } from './logprobs.js';
import { checkModel } from './models.js';
import { readJsonObject } from './request-body.js';
import { RequestFields } from './request-fields.js';
import { delivery, samplingOptions } from './sampling.js';

/** Top alternatives a request may ask for: the most the engine reports. */
const MAX_TOP_LOGPROBS = 20;

/** Answers a chat completion request. @internal */
export async function chatCompletions(ctx: ServerContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const fields = new RequestFields(await readJsonObject(req, ctx.maxBodyBytes));
  checkModel(ctx, fields.get('model'));
  const messages = chatMessages(fields.get('messages'));
  const templateVars = templateVarsOf(fields.get('chat_template_kwargs'));
  const options = samplingOptions(fields, ctx.engine.modelInfo, ['max_completion_tokens', 'max_tokens']);
  const top = topLogprobs(fields);
  if (top !== undefined) options.logprobs = Math.max(1, top); // the engine reports a token's own logprob with its top N
  refuseUnsupported(fields);
  const how = delivery(fields);
  fields.rejectUnread();
  try {
    await runCompletion(ctx, res, {
      input: { messages, templateVars },
      options,
      delivery: how,
      shape: new ChatShape(ctx.tokenTexts, ctx.engine.modelInfo.eosTokenIds, top),
      inputParam: 'messages',
    });
  } catch (err) {
    throw withServerAdvice(err);
  }
}

/** The engine's advice for a checkpoint that cannot chat speaks of the SDK; a client needs the endpoint to use. */
function withServerAdvice(err: unknown): unknown {
  if (!(err instanceof ApiError) || (err.code !== 'ERR_NO_CHAT_TEMPLATE' && err.code !== 'ERR_NO_TOKENIZER')) return err;
  const lacks = err.code === 'ERR_NO_TOKENIZER' ? 'a tokenizer' : 'a chat template';
  const instead = err.code === 'ERR_NO_TOKENIZER' ? 'a prompt of token ids' : 'a text prompt';
  return new ApiError(400, `This model has no ${lacks}, so it cannot format chat messages. Use /v1/completions with ${instead}.`, {
    param: 'messages',
    code: err.code,
    cause: err,
  });
}

/** `logprobs` (a boolean) and `top_logprobs`: undefined for none, else how many alternatives per token. */
function topLogprobs(fields: RequestFields): number | undefined {
  const logprobs = fields.get('logprobs');
  const top = fields.get('top_logprobs');
  if (logprobs !== undefined && typeof logprobs !== 'boolean') {
    throw badParam('logprobs', `"logprobs" must be a boolean, got ${JSON.stringify(logprobs)}.`);
  }
  if (top !== undefined) {
    if (typeof top !== 'number' || !Number.isInteger(top) || top < 0 || top > MAX_TOP_LOGPROBS) {
      throw badParam('top_logprobs', `"top_logprobs" must be an integer from 0 to ${MAX_TOP_LOGPROBS}, got ${JSON.stringify(top)}.`);
    }
    if (logprobs !== true) throw badParam('top_logprobs', '"top_logprobs" needs "logprobs": true.');
  }
  return logprobs === true ? ((top as number | undefined) ?? 0) : undefined;
}

/** vLLM's `chat_template_kwargs`: variables for the chat template, such as `{ "enable_thinking": false }` for Qwen3. */
function templateVarsOf(value: unknown): Record<string, unknown> {
  if (value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw badParam(
      'chat_template_kwargs',
      '"chat_template_kwargs" must be an object of template variables, such as { "enable_thinking": false }.',
    );
  }
  return value as Record<string, unknown>;
}

/** Chat parameters this server does not implement, accepted only at values that ask for nothing. */
function refuseUnsupported(fields: RequestFields): void {
  const none = (v: unknown): boolean => v === 'none';
  const empty = (v: unknown): boolean => Array.isArray(v) && v.length === 0;
  fields.onlyDefault('tools', empty, 'this server does not parse tool calls out of the model\'s output.');
  fields.onlyDefault('tool_choice', none, 'this server does not parse tool calls out of the model\'s output.');
  fields.onlyDefault('functions', empty, 'this server does not parse function calls out of the model\'s output.');
  fields.onlyDefault('function_call', none, 'this server does not parse function calls out of the model\'s output.');
  const text = (v: unknown): boolean => (v as { type?: unknown }).type === 'text';
  fields.onlyDefault('response_format', text, 'only { "type": "text" }: this server does not constrain output to a format.');
  fields.onlyDefault('modalities', (v) => Array.isArray(v) && v.every((m) => m === 'text'), 'this server outputs text only.');
  fields.onlyDefault('audio', () => false, 'this server outputs text only.');
  fields.onlyDefault('prediction', () => false, 'predicted outputs are not implemented.');
  fields.onlyDefault('web_search_options', () => false, 'this server has no web search.');
  fields.onlyDefault(
    'reasoning_effort',
    () => false,
    'pass the chat template\'s own variable instead, such as "chat_template_kwargs": { "enable_thinking": false } for Qwen3.',
  );
  fields.onlyDefault('verbosity', () => false, 'the model\'s verbosity cannot be set.');
  fields.ignore('parallel_tool_calls'); // meaningful only with tools, which are refused above
}

/** Chat responses: `message` / `delta` choices and `logprobs.content`. */
class ChatShape implements CompletionShape {
  readonly idPrefix = 'chatcmpl';
  readonly object = 'chat.completion';
  readonly chunkObject = 'chat.completion.chunk';
  readonly #texts: TokenTexts;
  readonly #eos: readonly number[];
  /** Alternatives per token, or undefined when the request wants no logprobs. */
  readonly #top: number | undefined;

  constructor(texts: TokenTexts, eos: readonly number[], top: number | undefined) {
    this.#texts = texts;
    this.#eos = eos;
    this.#top = top;
  }

  opening(): unknown {
    return { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null };
  }

  delta(chunk: GenerationChunk): unknown {
    const text = chunk.text ?? '';
    const logprobs = this.#logprobs(chunk.logprobs);
    if (text === '' && (logprobs === null || logprobs.content.length === 0)) return undefined;
    return { index: 0, delta: { content: text }, logprobs, finish_reason: null };
  }

  closing(result: GenerationResult): unknown {
    return { index: 0, delta: {}, logprobs: null, finish_reason: finishReasonOf(result.finishReason) };
  }

  whole(result: GenerationResult): unknown {
    return {
      index: 0,
      message: { role: 'assistant', content: result.text ?? '', refusal: null },
      logprobs: this.#logprobs(result.logprobs),
      finish_reason: finishReasonOf(result.finishReason),
    };
  }

  #logprobs(logprobs: GenerationChunk['logprobs']): { content: unknown[]; refusal: null } | null {
    if (this.#top === undefined) return null;
    return { content: this.#texts.chat(reportedLogprobs(logprobs, this.#eos), this.#top), refusal: null };
  }
}

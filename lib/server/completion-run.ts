/**
 * Running one completion request on the engine and answering it: one JSON response, or server-sent events as the
 * tokens come. Both endpoints (chat and text completions) go through here; they differ only in their
 * {@link CompletionShape}.
 * @internal
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { Generation } from '../generation/generation.js';
import type { GenerateInput, GenerateOptions } from '../generation/options.js';
import type { FinishReason, GenerationChunk, GenerationResult } from '../generation/result.js';
import { ApiError, apiErrorOf } from './api-error.js';
import type { ServerContext } from './context.js';
import { EventStream } from './event-stream.js';
import type { Delivery } from './sampling.js';
import { sendJson } from './send.js';

/** How an endpoint words its responses: the objects' names and each choice. @internal */
export interface CompletionShape {
  /** The prefix of response ids: `chatcmpl` or `cmpl`. */
  readonly idPrefix: string;
  /** `object` of a whole response. */
  readonly object: string;
  /** `object` of a streamed chunk. */
  readonly chunkObject: string;
  /** The choice of the first streamed chunk, sent before any token (chat: the assistant's role); or none. */
  opening(): unknown;
  /** The choice of a streamed chunk for these tokens, or undefined when they bring nothing to send yet. */
  delta(chunk: GenerationChunk): unknown;
  /** The choice of the last streamed chunk, carrying `finish_reason`. */
  closing(result: GenerationResult): unknown;
  /** The one choice of a whole response. */
  whole(result: GenerationResult): unknown;
}

/** A request ready to run. @internal */
export interface CompletionRequest {
  input: GenerateInput;
  options: GenerateOptions;
  delivery: Delivery;
  shape: CompletionShape;
  /** The request parameter that holds the input (`prompt`, `messages`), named in errors about it. */
  inputParam: string;
}

/** The OpenAI finish reason of an ended generation: a stop id or string is "stop", the token limit "length". @internal */
export function finishReasonOf(reason: FinishReason): 'stop' | 'length' {
  return reason === 'length' ? 'length' : 'stop';
}

/**
 * Runs the request and answers it. A client that goes away aborts its generation (its KV blocks go back to the
 * pool at once); a server that closes, or an engine disposed meanwhile, ends it with a 503 (in-band once streaming).
 * @throws ApiError when the request cannot start (bad input, disposed engine) or a whole response fails.
 * @internal
 */
export async function runCompletion(ctx: ServerContext, res: ServerResponse, request: CompletionRequest): Promise<void> {
  const controller = new AbortController();
  // 'close' comes when the response is done or the connection is gone; after a full answer the abort is a no-op.
  const onClose = (): void => controller.abort();
  res.once('close', onClose);
  if (res.destroyed) controller.abort(); // gone while its body was being read: start nothing that runs
  const untrack = ctx.track(controller);
  try {
    const gen = start(ctx, request, controller.signal);
    const id = `${request.shape.idPrefix}-${randomUUID().replaceAll('-', '')}`;
    const envelope = {
      id,
      object: request.delivery.stream ? request.shape.chunkObject : request.shape.object,
      created: Math.floor(Date.now() / 1000),
      model: ctx.modelName,
    };
    if (request.delivery.stream) await stream(ctx, res, gen, request, envelope);
    else await whole(res, gen, request.shape, envelope);
  } finally {
    res.off('close', onClose);
    untrack();
  }
}

function start(ctx: ServerContext, request: CompletionRequest, signal: AbortSignal): Generation {
  try {
    return ctx.engine.generate(request.input, { ...request.options, signal });
  } catch (err) {
    const error = apiErrorOf(err);
    // The parameters were checked before; what the engine refuses now is the input itself.
    if (error.status === 400 && error.param === null) {
      throw new ApiError(400, error.message, { param: request.inputParam, code: error.code, cause: err });
    }
    throw error;
  }
}

type Envelope = { id: string; object: string; created: number; model: string };

async function whole(res: ServerResponse, gen: Generation, shape: CompletionShape, envelope: Envelope): Promise<void> {
  const result = await gen;
  if (result.finishReason === 'abort') {
    if (res.destroyed) return; // the client left: nobody to answer
    throw ended();
  }
  sendJson(res, 200, { ...envelope, choices: [shape.whole(result)], usage: usageOf(result) }, { 'x-request-id': envelope.id });
}

async function stream(
  ctx: ServerContext,
  res: ServerResponse,
  gen: Generation,
  request: CompletionRequest,
  envelope: Envelope,
): Promise<void> {
  const { shape, delivery } = request;
  const events = new EventStream(res, { 'x-request-id': envelope.id });
  // With include_usage every chunk carries "usage": null and one more chunk, without choices, carries the usage.
  const usage = delivery.includeUsage ? { usage: null } : {};
  try {
    const opening = shape.opening();
    if (opening !== undefined) await events.send({ ...envelope, choices: [opening], ...usage });
    for await (const chunk of gen) {
      if (events.closed) break; // leaving the loop aborts the generation
      const choice = shape.delta(chunk);
      if (choice !== undefined) await events.send({ ...envelope, choices: [choice], ...usage });
    }
    const result = await gen;
    if (events.closed) return;
    if (result.finishReason === 'abort') return await events.fail(ended());
    await events.send({ ...envelope, choices: [shape.closing(result)], ...usage });
    if (delivery.includeUsage) await events.send({ ...envelope, choices: [], usage: usageOf(result) });
    events.end();
  } catch (err) {
    const error = apiErrorOf(err);
    if (error.status === 500) ctx.report(err);
    await events.fail(error);
  }
}

function usageOf({ usage }: GenerationResult): { prompt_tokens: number; completion_tokens: number; total_tokens: number } {
  const { promptTokens, completionTokens } = usage;
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

function ended(): ApiError {
  return new ApiError(503, 'The request was ended before it finished: the server is closing or its engine was disposed.', {
    code: 'service_unavailable',
  });
}

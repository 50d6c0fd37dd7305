/**
 * `POST /v1/completions`: a text (or token id) prompt continued as it is, no chat template, answered as
 * `text_completion`.
 * @internal
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GenerateInput } from '../generation/options.js';
import type { GenerationChunk, GenerationResult } from '../generation/result.js';
import { badParam } from './api-error.js';
import { type CompletionShape, finishReasonOf, runCompletion } from './completion-run.js';
import type { ServerContext } from './context.js';
import { type CompletionLogprobs, type TokenTexts, reportedLogprobs } from './logprobs.js';
import { checkModel } from './models.js';
import { readJsonObject } from './request-body.js';
import { RequestFields } from './request-fields.js';
import { delivery, samplingOptions } from './sampling.js';

/** Top alternatives a request may ask for: the most the engine reports (the OpenAI API allows 5). */
const MAX_LOGPROBS = 20;

/** Answers a completion request. @internal */
export async function completions(ctx: ServerContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const fields = new RequestFields(await readJsonObject(req, ctx.maxBodyBytes));
  checkModel(ctx, fields.get('model'));
  const input = promptInput(fields.get('prompt'));
  const options = samplingOptions(fields, ctx.engine.modelInfo, ['max_tokens']);
  const top = logprobsOf(fields.get('logprobs'));
  if (top !== undefined) options.logprobs = Math.max(1, top); // the engine reports a token's own logprob with its top N
  fields.onlyDefault('echo', (v) => v === false, 'the response holds the completion only; prepend the prompt yourself.');
  fields.onlyDefault('suffix', (v) => v === '', 'this server does not insert text between a prompt and a suffix.');
  fields.onlyDefault('best_of', (v) => v === 1, 'this server generates one sequence per request.');
  const how = delivery(fields);
  fields.rejectUnread();
  await runCompletion(ctx, res, {
    input,
    options,
    delivery: how,
    shape: new CompletionsShape(ctx.tokenTexts, ctx.engine.modelInfo.eosTokenIds, top),
    inputParam: 'prompt',
  });
}

/**
 * `prompt`: a string or an array of token ids, or a one-element array of either. Several prompts in one request
 * are refused: the engine batches separate requests as well.
 */
function promptInput(value: unknown): GenerateInput {
  if (typeof value === 'string') return { prompt: value };
  if (Array.isArray(value)) {
    if (value.length > 0 && value.every((id) => typeof id === 'number')) return { tokens: value as number[] };
    if (value.length === 1 && (typeof value[0] === 'string' || Array.isArray(value[0]))) return promptInput(value[0]);
    if (value.length > 1 && value.every((p) => typeof p === 'string' || Array.isArray(p))) {
      const message = `This server takes one prompt per request, got ${value.length}. Send one request each: the engine batches them.`;
      throw badParam('prompt', message, 'unsupported_value');
    }
  }
  throw badParam('prompt', '"prompt" must be a string or an array of token ids.');
}

function logprobsOf(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_LOGPROBS) {
    throw badParam('logprobs', `"logprobs" must be an integer from 0 to ${MAX_LOGPROBS}, got ${JSON.stringify(value)}.`);
  }
  return value;
}

/** Completion responses: `text` choices and the parallel-array `logprobs`. */
class CompletionsShape implements CompletionShape {
  readonly idPrefix = 'cmpl';
  readonly object = 'text_completion';
  readonly chunkObject = 'text_completion';
  readonly #texts: TokenTexts;
  readonly #eos: readonly number[];
  /** Alternatives per token, or undefined when the request wants no logprobs. */
  readonly #top: number | undefined;
  /** Where the next streamed token's text starts in the completion. */
  #offset = 0;

  constructor(texts: TokenTexts, eos: readonly number[], top: number | undefined) {
    this.#texts = texts;
    this.#eos = eos;
    this.#top = top;
  }

  opening(): unknown {
    return undefined;
  }

  delta(chunk: GenerationChunk): unknown {
    const text = chunk.text ?? '';
    const logprobs = this.#logprobs(chunk.logprobs);
    if (text === '' && (logprobs === null || logprobs.tokens.length === 0)) return undefined;
    return { index: 0, text, logprobs, finish_reason: null };
  }

  closing(result: GenerationResult): unknown {
    return { index: 0, text: '', logprobs: null, finish_reason: finishReasonOf(result.finishReason) };
  }

  whole(result: GenerationResult): unknown {
    this.#offset = 0;
    return { index: 0, text: result.text ?? '', logprobs: this.#logprobs(result.logprobs), finish_reason: finishReasonOf(result.finishReason) };
  }

  #logprobs(logprobs: GenerationChunk['logprobs']): CompletionLogprobs | null {
    if (this.#top === undefined) return null;
    const out = this.#texts.completion(reportedLogprobs(logprobs, this.#eos), this.#top, this.#offset);
    this.#offset = out.end;
    return out.logprobs;
  }
}

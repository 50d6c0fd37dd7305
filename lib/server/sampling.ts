/**
 * The parameters both completion endpoints share — sampling, stopping, length, `n`, streaming — read from a request
 * and mapped onto `engine.generate()`'s options.
 * @internal
 * @module
 */
import type { GenerateOptions } from '../generation/options.js';
import { validateGenerateOptions, validateTextOptions } from '../generation/options.js';
import type { ModelInfo } from '../engine/model-info.js';
import { badParam } from './api-error.js';
import type { RequestFields } from './request-fields.js';

/**
 * OpenAI's sampling parameters and their generate() option, plus the extensions vLLM and others accept under these
 * names (`top_k`, `min_p`, `repetition_penalty`), which the engine implements. (`ignore_eos`, vLLM's too, is read
 * in samplingOptions.)
 */
const SAMPLING: ReadonlyArray<readonly [param: string, option: keyof GenerateOptions]> = [
  ['temperature', 'temperature'],
  ['top_p', 'topP'],
  ['seed', 'seed'],
  ['presence_penalty', 'presencePenalty'],
  ['frequency_penalty', 'frequencyPenalty'],
  ['logit_bias', 'logitBias'],
  ['top_k', 'topK'],
  ['min_p', 'minP'],
  ['repetition_penalty', 'repetitionPenalty'],
];

/** Accepted and ignored: they label or route a request and change nothing in its output. */
const IGNORED = ['user', 'metadata', 'store', 'service_tier', 'safety_identifier', 'prompt_cache_key'];

/** How a request wants its answer delivered. @internal */
export interface Delivery {
  /** Server-sent events instead of one JSON response. */
  stream: boolean;
  /** A last event with the usage (`stream_options.include_usage`). */
  includeUsage: boolean;
}

/**
 * The generate() options of the shared parameters. `maxTokensParams` are the names the endpoint accepts for the
 * length limit, in order of preference; without one, the generation may fill the context, as the OpenAI API does.
 * @throws ApiError 400 naming the parameter.
 * @internal
 */
export function samplingOptions(fields: RequestFields, model: ModelInfo, maxTokensParams: readonly string[]): GenerateOptions {
  const options: Record<string, unknown> = {};
  for (const [param, option] of SAMPLING) {
    const value = fields.get(param);
    if (value !== undefined) options[option] = checked(param, option, value, model);
  }
  options.maxTokens = maxTokens(fields, model, maxTokensParams);
  const stop = stopStrings(fields.get('stop'));
  if (stop.length > 0) options.stop = stop;
  // vLLM's extension, which benchmark clients send: the model's end-of-sequence ids do not end the generation.
  const ignoreEos = fields.get('ignore_eos');
  if (ignoreEos !== undefined && typeof ignoreEos !== 'boolean')
    throw badParam('ignore_eos', `"ignore_eos" must be a boolean, got ${JSON.stringify(ignoreEos)}.`);
  if (ignoreEos) options.stopTokenIds = [];
  const n = fields.get('n');
  if (n !== undefined && n !== 1) {
    const message = `This server returns one choice per request (n = 1), got n = ${JSON.stringify(n)}. Send n requests instead: the engine batches them.`;
    throw badParam('n', message, 'unsupported_value');
  }
  fields.ignore(...IGNORED);
  return options as GenerateOptions;
}

/** `stream` and `stream_options`. @throws ApiError 400 for a malformed or misplaced `stream_options`. @internal */
export function delivery(fields: RequestFields): Delivery {
  const stream = fields.get('stream');
  if (stream !== undefined && typeof stream !== 'boolean') throw badParam('stream', `"stream" must be a boolean, got ${JSON.stringify(stream)}.`);
  const streamOptions = fields.get('stream_options');
  if (streamOptions === undefined) return { stream: stream === true, includeUsage: false };
  if (stream !== true) throw badParam('stream_options', '"stream_options" is only allowed when "stream" is true.');
  if (typeof streamOptions !== 'object' || Array.isArray(streamOptions)) {
    throw badParam('stream_options', '"stream_options" must be an object such as { "include_usage": true }.');
  }
  const { include_usage: includeUsage, ...rest } = streamOptions as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) {
    throw badParam(`stream_options.${unknown}`, `Unrecognized request argument supplied: stream_options.${unknown}`, 'unknown_parameter');
  }
  if (includeUsage !== undefined && includeUsage !== null && typeof includeUsage !== 'boolean') {
    throw badParam('stream_options.include_usage', '"stream_options.include_usage" must be a boolean.');
  }
  return { stream: true, includeUsage: includeUsage === true };
}

function maxTokens(fields: RequestFields, model: ModelInfo, params: readonly string[]): number {
  const given = params.map((param) => [param, fields.get(param)] as const).filter(([, value]) => value !== undefined);
  if (given.length > 1 && given.some(([, value]) => value !== given[0][1])) {
    throw badParam(given[1][0], `"${given[0][0]}" and "${given[1][0]}" disagree; give one of them.`);
  }
  if (given.length === 0) return model.maxContext; // the context's end stops it first
  const [param, value] = given[0];
  return checked(param, 'maxTokens', value, model) as number;
}

/** `stop`: a string or an array of strings, as generate()'s `stop` strings. */
function stopStrings(value: unknown): string[] {
  if (value === undefined) return [];
  const stop = typeof value === 'string' ? [value] : value;
  try {
    return validateTextOptions({ stop }).stop;
  } catch (err) {
    throw renamed(err, 'stop', 'stop');
  }
}

/**
 * `value` checked by generate()'s own validator (one set of rules for the SDK and the server), its message naming
 * the OpenAI parameter instead of the SDK option.
 */
function checked(param: string, option: keyof GenerateOptions, value: unknown, model: ModelInfo): unknown {
  try {
    validateGenerateOptions({ [option]: value }, { vocabSize: model.vocabSize });
  } catch (err) {
    throw renamed(err, param, option);
  }
  return value;
}

function renamed(err: unknown, param: string, option: string): unknown {
  if (!(err instanceof Error) || (err as { code?: unknown }).code !== 'ERR_INVALID_OPTION') return err;
  const message = err.message.replaceAll(`Option "${option}"`, `"${param}"`).replaceAll(`${option}[`, `${param}[`);
  return badParam(param, message);
}

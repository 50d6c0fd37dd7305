/**
 * The one model a server serves: `GET /v1/models`, `GET /v1/models/{id}`, and the check of a request's `model`.
 * @internal
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, badParam } from './api-error.js';
import type { ServerContext } from './context.js';
import { sendJson } from './send.js';

/** The model object of the OpenAI API, with the context length as vLLM adds it (`max_model_len`). */
function modelObject(ctx: ServerContext): object {
  return { id: ctx.modelName, object: 'model', created: ctx.created, owned_by: 'vtengine', max_model_len: ctx.engine.modelInfo.maxContext };
}

/** `GET /v1/models`. @internal */
export function listModels(ctx: ServerContext, _req: IncomingMessage, res: ServerResponse): void {
  sendJson(res, 200, { object: 'list', data: [modelObject(ctx)] });
}

/** `GET /v1/models/{id}`. @internal */
export function retrieveModel(ctx: ServerContext, id: string, res: ServerResponse): void {
  checkModel(ctx, id);
  sendJson(res, 200, modelObject(ctx));
}

/**
 * Checks a request's `model`: absent is the served model (convenient with curl), anything else must name it.
 * @throws ApiError 404 `model_not_found` for another model, 400 for a non-string.
 * @internal
 */
export function checkModel(ctx: ServerContext, model: unknown): void {
  if (model === undefined || model === ctx.modelName) return;
  if (typeof model !== 'string') throw badParam('model', `"model" must be a string, got ${JSON.stringify(model)}.`);
  throw new ApiError(404, `The model ${JSON.stringify(model)} does not exist: this server serves ${JSON.stringify(ctx.modelName)}.`, {
    param: 'model',
    code: 'model_not_found',
  });
}

/**
 * `GET /health`: whether the server can take requests, for load balancers and container probes.
 * @internal
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ServerContext } from './context.js';
import { sendJson } from './send.js';

/**
 * 200 `{ status: 'ok', requests: { running, waiting, paused } }` while the engine serves; 503
 * `{ status: 'unavailable' }` once the server is closing or its engine is disposed. It needs no API key and says
 * nothing about the model. `paused` counts requests whose client reads its stream more slowly than the engine
 * generates (`EngineStats.requestsPaused`): they wait, holding no seat in the batch, so many of them mean slow
 * clients or a congested network rather than a busy engine.
 * @internal
 */
export function health(ctx: ServerContext, _req: IncomingMessage, res: ServerResponse): void {
  if (ctx.closing || ctx.engine.disposed) {
    sendJson(res, 503, { status: 'unavailable' });
    return;
  }
  const { requestsRunning, requestsWaiting, requestsPaused } = ctx.engine.stats();
  const requests = { running: requestsRunning, waiting: requestsWaiting, paused: requestsPaused };
  sendJson(res, 200, { status: 'ok', requests });
}

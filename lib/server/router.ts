/**
 * The routes of the server and the dispatch of a request to its handler, with the access check and the answer to
 * any failure in the OpenAI error shape.
 * @internal
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, apiErrorOf } from './api-error.js';
import type { Access } from './auth.js';
import { chatCompletions } from './chat-completions.js';
import { completions } from './completions.js';
import type { ServerContext } from './context.js';
import { health } from './health.js';
import { listModels, retrieveModel } from './models.js';
import { sendError } from './send.js';

type Handler = (ctx: ServerContext, req: IncomingMessage, res: ServerResponse, param: string) => void | Promise<void>;

interface Route {
  /** The path, or a pattern whose first group is the handler's `param`. */
  path: string | RegExp;
  /** Handlers by method. */
  methods: Readonly<Record<string, Handler>>;
  /** Served without the access check (a probe must not need the key). */
  open?: boolean;
}

const ROUTES: readonly Route[] = [
  { path: '/v1/chat/completions', methods: { POST: chatCompletions } },
  { path: '/v1/completions', methods: { POST: completions } },
  { path: '/v1/models', methods: { GET: listModels } },
  { path: /^\/v1\/models\/(.+)$/, methods: { GET: (ctx, _req, res, id) => retrieveModel(ctx, decoded(id), res) } },
  { path: '/health', methods: { GET: health }, open: true },
];

/**
 * Answers one request. Never rejects: every failure becomes an error response (or, once a stream has started, an
 * error event), and failures that are not the client's are reported on stderr.
 * @internal
 */
export async function route(ctx: ServerContext, access: Access, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    await dispatch(ctx, access, req, res);
  } catch (err) {
    const error = apiErrorOf(err);
    if (error.status === 500) ctx.report(err);
    if (res.headersSent) res.destroy(); // a stream that failed past its own error handling: cut it
    else sendError(res, error);
  }
}

async function dispatch(ctx: ServerContext, access: Access, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  const path = (req.url ?? '/').split('?')[0];
  let param = '';
  const found = ROUTES.find((r) => {
    if (typeof r.path === 'string') return r.path === path;
    const match = r.path.exec(path);
    if (match) param = match[1];
    return match !== null;
  });
  if (!found?.open) access.check(req);
  if (!found) throw new ApiError(404, `Invalid URL (${method} ${path})`, { code: 'not_found' });
  // HEAD is GET without the body (node:http leaves the body out by itself).
  const handler = found.methods[method] ?? (method === 'HEAD' ? found.methods.GET : undefined);
  if (!handler) {
    const allow = Object.keys(found.methods).join(', ');
    throw new ApiError(405, `${method} is not allowed on ${path}; use ${allow}.`, { code: 'method_not_allowed', headers: { allow } });
  }
  if (ctx.closing && !found.open) {
    throw new ApiError(503, 'The server is shutting down.', { code: 'service_unavailable', headers: { connection: 'close' } });
  }
  await handler(ctx, req, res, param);
}

/** A path segment with its %-escapes decoded; as it is when they are malformed (it then names no model anyway). */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

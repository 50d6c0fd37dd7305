/**
 * Writing whole JSON responses (results and errors).
 * @internal
 * @module
 */
import type { ServerResponse } from 'node:http';
import type { ApiError } from './api-error.js';

/** Sends `body` as the JSON response with `status`. @internal */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** Sends an error in the OpenAI shape, unless the response has already started (then the caller reports it in-band). @internal */
export function sendError(res: ServerResponse, error: ApiError): void {
  if (res.headersSent || res.writableEnded) return;
  sendJson(res, error.status, error.body(), { ...error.headers });
}

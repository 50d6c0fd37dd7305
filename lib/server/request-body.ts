/**
 * Reading a request's JSON body, within a size limit.
 * @internal
 * @module
 */
import type { IncomingMessage } from 'node:http';
import { ApiError } from './api-error.js';

/**
 * The request's body parsed as a JSON object.
 *
 * The body must be declared `application/json`: a web page can send a cross-site POST to a server on this machine
 * without asking first only as a "simple" request (form or text/plain content), so demanding JSON makes the browser
 * ask (a CORS preflight), which this server never grants.
 *
 * @throws ApiError 415 for another content type, 413 past `maxBytes`, 400 for malformed JSON or a non-object.
 * @internal
 */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (type !== 'application/json') {
    throw new ApiError(415, `The request body must be JSON, sent with "Content-Type: application/json" (got ${type ? `"${type}"` : 'none'}).`, {
      code: 'unsupported_media_type',
    });
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge(maxBytes);

  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const part of req as AsyncIterable<Buffer>) {
      size += part.length;
      if (size > maxBytes) throw tooLarge(maxBytes);
      parts.push(part);
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    // The client went away mid-body, or the server is closing: nobody's bug, nothing to report.
    throw new ApiError(400, 'The request body ended before it was complete.', { code: 'incomplete_body', cause: err });
  }
  let body: unknown;
  try {
    body = JSON.parse(Buffer.concat(parts).toString('utf8'));
  } catch (err) {
    throw new ApiError(400, `The request body is not valid JSON: ${(err as Error).message}`, { code: 'invalid_json', cause: err });
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ApiError(400, 'The request body must be a JSON object.', { code: 'invalid_json' });
  }
  return body as Record<string, unknown>;
}

function tooLarge(maxBytes: number): ApiError {
  return new ApiError(413, `The request body is larger than this server accepts (${maxBytes} bytes; see maxBodyBytes).`, {
    code: 'request_too_large',
    // The rest of the body is left unread, so the connection cannot carry another request.
    headers: { connection: 'close' },
  });
}

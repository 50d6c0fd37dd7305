/**
 * Failures as the OpenAI API reports them: an HTTP status and `{ error: { message, type, param, code } }`, with the
 * mapping from vtengine's EngineError codes.
 * @internal
 * @module
 */

/** The body of an error response, in the OpenAI API's shape. @internal */
export interface ApiErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/**
 * A request that cannot be served, with the status and the OpenAI error fields to answer it with. Thrown by the
 * request handlers and turned into the response by the router; it never reaches a caller of the SDK.
 * @internal
 */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
  /** Extra response headers, such as `Allow` for a 405 or `WWW-Authenticate` for a 401. */
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: number,
    message: string,
    fields: { type?: string; param?: string | null; code?: string | null; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: fields.cause });
    this.name = 'ApiError';
    this.status = status;
    this.type = fields.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    this.param = fields.param ?? null;
    this.code = fields.code ?? null;
    this.headers = fields.headers ?? {};
  }

  /** The response body. */
  body(): ApiErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** A 400 for a request parameter, named as the OpenAI API names it. @internal */
export function badParam(param: string, message: string, code: string | null = 'invalid_value'): ApiError {
  return new ApiError(400, message, { param, code });
}

/**
 * How each EngineError code is answered: what the client sent is a 4xx, what the engine or the server could not do
 * is a 5xx. `code` is the OpenAI API's code where it has one for the same failure, else vtengine's own.
 */
const BY_ENGINE_CODE: Readonly<Record<string, { status: number; code?: string }>> = {
  ERR_INVALID_OPTION: { status: 400 },
  ERR_CONTEXT_OVERFLOW: { status: 400, code: 'context_length_exceeded' },
  ERR_NO_TOKENIZER: { status: 400 },
  ERR_NO_CHAT_TEMPLATE: { status: 400 },
  ERR_DISPOSED: { status: 503 },
  ERR_ABORTED: { status: 503 },
  ERR_OUT_OF_MEMORY: { status: 503 },
};

/**
 * The ApiError to answer a failure with. EngineErrors are recognised by their `code` rather than by class, so that
 * errors from another copy of the package (the CommonJS bundle next to the ESM build) map the same way. Anything
 * else is a 500 whose message hides the internals.
 * @internal
 */
export function apiErrorOf(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  if (typeof code === 'string' && code.startsWith('ERR_')) {
    const mapped = BY_ENGINE_CODE[code] ?? { status: 500 };
    return new ApiError(mapped.status, (err as Error).message, { code: mapped.code ?? code, cause: err });
  }
  return new ApiError(500, 'The server failed while handling the request (a bug in vtengine: the server printed it on stderr).', {
    code: 'internal_error',
    cause: err,
  });
}

/**
 * Who may use the server: the bearer key, and the Host check that protects a key-less server on loopback.
 * @internal
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { ApiError } from './api-error.js';
import { isLoopbackHostHeader } from './loopback.js';

/**
 * Checks a request against the server's access rules.
 * @internal
 */
export class Access {
  /** SHA-256 of the key: comparing digests of equal length in constant time says nothing about the key's length. */
  readonly #keyDigest: Buffer | undefined;
  readonly #checkHost: boolean;

  /**
   * @param apiKey - the bearer key every request must carry, or undefined for none.
   * @param loopbackOnly - whether the server listens on loopback only. Without a key, such a server answers only
   * requests whose Host header names this machine (see {@link isLoopbackHostHeader}).
   */
  constructor(apiKey: string | undefined, loopbackOnly: boolean) {
    this.#keyDigest = apiKey === undefined ? undefined : digest(apiKey);
    this.#checkHost = apiKey === undefined && loopbackOnly;
  }

  /** @throws ApiError 401 for a missing or wrong key, 403 for a foreign Host header on a key-less loopback server. */
  check(req: IncomingMessage): void {
    if (this.#checkHost && !isLoopbackHostHeader(req.headers.host)) {
      throw new ApiError(
        403,
        `This server listens on loopback without an API key, so it answers only requests addressed to this machine ` +
          `(localhost or a loopback address); this one named ${JSON.stringify(req.headers.host ?? '')}. Start it with ` +
          'an apiKey to serve other names (a reverse proxy, a DNS name).',
        { code: 'host_not_allowed' },
      );
    }
    if (!this.#keyDigest) return;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match) {
      throw new ApiError(401, 'This server needs an API key: send it as "Authorization: Bearer <key>" (the apiKey of OpenAI clients).', {
        code: 'invalid_api_key',
        headers: { 'www-authenticate': 'Bearer' },
      });
    }
    if (!timingSafeEqual(digest(match[1]), this.#keyDigest)) {
      throw new ApiError(401, 'Incorrect API key provided.', {
        code: 'invalid_api_key',
        headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      });
    }
  }
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

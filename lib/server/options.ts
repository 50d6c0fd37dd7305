/**
 * The options of `createServer()` and their validation.
 * @module
 */
import { InvalidOptionError } from '../errors.js';
import { booleanOption, integerOption, optionsRecord, rejectUnknownKeys, show } from '../validation.js';

/** Options of {@link createServer}. Every field is optional; an unknown field is an error, so a typo is caught. */
export interface ServerOptions {
  /**
   * The address to listen on. Default `'127.0.0.1'`: only programs on this machine can connect. A host that is not
   * a loopback address (`'0.0.0.0'`, `'::'`, a LAN address or a name that resolves to one) is refused unless
   * `apiKey` is set or `allowUnauthenticated` is `true`.
   */
  host?: string;
  /** The TCP port, 0 to 65535. Default 8080; 0 picks a free port (read it from `listen()`'s result). */
  port?: number;
  /**
   * The key clients must send as `Authorization: Bearer <key>` (the OpenAI clients' `apiKey`). Every route but
   * `GET /health` then answers 401 without it. Default: none, which is allowed only on a loopback host.
   */
  apiKey?: string;
  /** The model id that `GET /v1/models` lists and requests' `model` must name. Default `'vtengine'`. */
  modelName?: string;
  /**
   * Listen on a non-loopback host without an `apiKey`: anyone who can reach the port can then run the model.
   * Default `false`. Meant for a trusted network or a container whose port is published to loopback only.
   */
  allowUnauthenticated?: boolean;
  /** The largest request body accepted, in bytes; larger ones get 413. Default 4 MiB. */
  maxBodyBytes?: number;
}

/** The options with their defaults filled in. @internal */
export interface ResolvedServerOptions {
  host: string;
  port: number;
  apiKey: string | undefined;
  modelName: string;
  allowUnauthenticated: boolean;
  maxBodyBytes: number;
}

/** The defaults of {@link ServerOptions}. @internal */
export const SERVER_DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 8080,
  modelName: 'vtengine',
  maxBodyBytes: 4 * 1024 * 1024,
});

const KNOWN_KEYS: readonly (keyof ServerOptions)[] = ['host', 'port', 'apiKey', 'modelName', 'allowUnauthenticated', 'maxBodyBytes'];

/**
 * Checks the options of `createServer()` and fills in the defaults.
 * @throws InvalidOptionError naming the option, the value and what is allowed.
 * @internal
 */
export function resolveServerOptions(options: unknown): ResolvedServerOptions {
  const o = optionsRecord(options, 'The options of createServer()');
  rejectUnknownKeys(o, KNOWN_KEYS, 'createServer()');
  return {
    host: nonEmptyString('host', o.host) ?? SERVER_DEFAULTS.host,
    port: integerOption('port', o.port, 0, 65535) ?? SERVER_DEFAULTS.port,
    apiKey: apiKeyOption(o.apiKey),
    modelName: nonEmptyString('modelName', o.modelName) ?? SERVER_DEFAULTS.modelName,
    allowUnauthenticated: booleanOption('allowUnauthenticated', o.allowUnauthenticated) ?? false,
    maxBodyBytes: integerOption('maxBodyBytes', o.maxBodyBytes, 1, 2 ** 30) ?? SERVER_DEFAULTS.maxBodyBytes,
  };
}

function nonEmptyString(name: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidOptionError(`Option "${name}" must be a non-empty string, got ${show(value)}.`);
  }
  return value;
}

// A key is compared as bytes and travels in a header: characters a header cannot carry would make it unusable,
// and surrounding spaces are almost always a copy-paste accident that the client would not send.
function apiKeyOption(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^[\x21-\x7e]+$/.test(value)) {
    throw new InvalidOptionError(
      'Option "apiKey" must be a non-empty string of printable ASCII characters without spaces (it travels in the ' +
        `Authorization header), got ${typeof value === 'string' ? `a string of ${value.length} characters` : show(value)}.`,
    );
  }
  return value;
}

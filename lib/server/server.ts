/**
 * The OpenAI-compatible HTTP server over an engine: {@link createServer} and the {@link Server} it returns.
 * @module
 */
import { type Server as HttpServer, createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Engine } from '../engine/engine.js';
import { InvalidOptionError } from '../errors.js';
import { Access } from './auth.js';
import { ServerContext } from './context.js';
import { isLoopbackHost } from './loopback.js';
import { type ResolvedServerOptions, type ServerOptions, resolveServerOptions } from './options.js';
import { route } from './router.js';

/** Where a {@link Server} listens. */
export interface ServerAddress {
  /** The address bound, such as `'127.0.0.1'` or `'::'`. */
  host: string;
  /** The port bound (the one picked, when the options asked for port 0). */
  port: number;
  /** The base URL of the API, such as `'http://127.0.0.1:8080/v1'`: the `baseURL` of an OpenAI client. */
  url: string;
}

/**
 * An OpenAI-compatible HTTP server over one {@link Engine}, made by {@link createServer}. It serves
 * `GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions` (whole or streamed as server-sent events) and
 * `GET /health`; concurrent requests share the engine, which batches them.
 *
 * The server does not own the engine: {@link Server.close} ends the requests in flight but leaves the engine loaded,
 * and disposing the engine is the caller's job (after closing the server).
 */
export class Server implements AsyncDisposable {
  readonly #options: ResolvedServerOptions;
  readonly #ctx: ServerContext;
  readonly #http: HttpServer;
  #access: Access | undefined;
  #address: ServerAddress | null = null;
  #listening: Promise<ServerAddress> | undefined;
  #closing: Promise<void> | undefined;

  /** @internal Made by {@link createServer} only. */
  constructor(engine: Engine, options: ResolvedServerOptions) {
    this.#options = options;
    this.#ctx = new ServerContext(engine, options.modelName, options.maxBodyBytes);
    this.#http = createHttpServer((req, res) => {
      // Requests come only after listen(), which sets the access rules before it binds.
      this.#ctx.running(req, route(this.#ctx, this.#access!, req, res));
    });
  }

  /** Where the server listens, once {@link Server.listen} has resolved; `null` before, and after {@link Server.close}. */
  get address(): ServerAddress | null {
    return this.#address;
  }

  /** The model id the server lists and that requests must name. */
  get modelName(): string {
    return this.#options.modelName;
  }

  /** Requests being handled now (including ones still sending their body or reading their stream). */
  get activeRequests(): number {
    return this.#ctx.activeRequests;
  }

  /**
   * The underlying `node:http` server, for what this class does not cover (timeouts, `'connection'` events).
   * Listen and close through this class, not through it.
   */
  get httpServer(): HttpServer {
    return this.#http;
  }

  /**
   * Starts listening on the host and port of the options. Calling it again returns the same promise.
   *
   * @returns where it listens; `url` is the base URL to give an OpenAI client.
   * @throws (rejects with) {@link InvalidOptionError} when the host is not a loopback address and neither `apiKey`
   * nor `allowUnauthenticated` is set, when the address cannot be bound (the port is in use, the address is not
   * this machine's, a port below 1024 without the privilege), or after {@link Server.close}.
   */
  listen(): Promise<ServerAddress> {
    if (this.#closing) return Promise.reject(new InvalidOptionError('Server.listen() was called after close(); create a new server.'));
    this.#listening ??= this.#listen();
    return this.#listening;
  }

  /**
   * Stops the server: no new connections or requests; the generations in flight are aborted (their clients get a
   * 503, or an error event in a stream, and their KV blocks go back to the engine's pool); resolves once every
   * response has ended and every connection is closed. The engine stays loaded. Safe to call more than once.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  /** Same as {@link Server.close}, for `await using server = createServer(engine)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #listen(): Promise<ServerAddress> {
    const { host, port, apiKey, allowUnauthenticated } = this.#options;
    const loopback = await isLoopbackHost(host);
    if (!loopback && apiKey === undefined && !allowUnauthenticated) {
      throw new InvalidOptionError(
        `Listening on ${JSON.stringify(host)}, which is not a loopback address, would let anyone who reaches the port ` +
          'run the model. Set an apiKey (clients send it as a bearer token), or set allowUnauthenticated: true if the ' +
          'network is trusted.',
      );
    }
    this.#access = new Access(apiKey, loopback);
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => reject(listenError(err, host, port));
      this.#http.once('error', onError);
      this.#http.listen({ host, port }, () => {
        this.#http.off('error', onError);
        resolve();
      });
    });
    const info = this.#http.address() as AddressInfo;
    const shown = info.family === 'IPv6' || info.address.includes(':') ? `[${info.address}]` : info.address;
    this.#address = { host: info.address, port: info.port, url: `http://${shown}:${info.port}/v1` };
    if (this.#closing) await this.#closeHttp(); // close() came while the port was being bound
    return this.#address;
  }

  async #close(): Promise<void> {
    await this.#listening?.catch(() => {});
    await this.#closeHttp();
  }

  async #closeHttp(): Promise<void> {
    if (!this.#http.listening) return;
    const closed = new Promise<void>((resolve) => this.#http.close(() => resolve()));
    await this.#ctx.drain();
    // Every response has ended: what is left are idle keep-alive connections.
    this.#http.closeAllConnections();
    await closed;
    this.#address = null;
  }
}

/** A failure to bind, said in terms of the options. */
function listenError(err: NodeJS.ErrnoException, host: string, port: number): Error {
  const where = `${host}:${port}`;
  const why: Record<string, string> = {
    EADDRINUSE: `${where} is already in use; pick another port (port 0 picks a free one)`,
    EACCES: `binding ${where} needs privileges this process lacks; pick a port of 1024 or more`,
    EADDRNOTAVAIL: `${JSON.stringify(host)} is not an address of this machine`,
    ENOTFOUND: `the host name ${JSON.stringify(host)} does not resolve`,
  };
  const reason = err.code ? why[err.code] : undefined;
  if (!reason) return err;
  return new InvalidOptionError(`The server cannot listen: ${reason} (${err.code}).`, { cause: err });
}

/**
 * Creates an OpenAI-compatible HTTP server over a loaded engine. It does not listen yet: call
 * {@link Server.listen}. Any OpenAI client can then use it, with the returned address's `url` as its base URL.
 *
 * Chat requests are rendered with the model's chat template as `engine.generate({ messages })` renders them, so
 * the checkpoint needs a tokenizer and a chat template for `/v1/chat/completions` (and a tokenizer for text prompts).
 *
 * @param engine - the loaded engine; every request runs on it, batched with the others.
 * @param options - where to listen and who may connect; see {@link ServerOptions}.
 * @throws {@link InvalidOptionError} for bad options or an engine already disposed.
 *
 * @example
 * ```ts
 * import { Engine } from 'vtengine';
 * import { createServer } from 'vtengine/server';
 * import OpenAI from 'openai';
 *
 * const engine = await Engine.load('./models/Qwen3-0.6B');
 * const server = createServer(engine, { port: 8080, modelName: 'qwen3-0.6b' });
 * const { url } = await server.listen(); // http://127.0.0.1:8080/v1
 *
 * const client = new OpenAI({ baseURL: url, apiKey: 'unused' });
 * const reply = await client.chat.completions.create({
 *   model: 'qwen3-0.6b',
 *   messages: [{ role: 'user', content: 'Name three primes.' }],
 *   max_tokens: 64,
 * });
 * console.log(reply.choices[0].message.content);
 *
 * await server.close();
 * await engine.dispose();
 * ```
 */
export function createServer(engine: Engine, options?: ServerOptions): Server {
  const e = engine as Partial<Engine> | null | undefined;
  if (e === null || typeof e !== 'object' || typeof e.generate !== 'function' || typeof e.modelInfo !== 'object') {
    throw new InvalidOptionError('createServer() needs a loaded Engine (from Engine.load()) as its first argument.');
  }
  if (e.disposed) {
    throw new InvalidOptionError('createServer() was given an engine that is already disposed; load a new one with Engine.load().');
  }
  return new Server(engine, resolveServerOptions(options));
}

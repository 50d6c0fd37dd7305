/**
 * What every request handler of one server shares: the engine, the model's name, and the requests in flight.
 * @internal
 * @module
 */
import type { IncomingMessage } from 'node:http';
import type { Engine } from '../engine/engine.js';
import { TokenTexts } from './logprobs.js';

/** The shared state of one server's handlers. @internal */
export class ServerContext {
  readonly engine: Engine;
  readonly modelName: string;
  /** When the server was created, in Unix seconds: the `created` of the model it lists. */
  readonly created = Math.floor(Date.now() / 1000);
  readonly tokenTexts: TokenTexts;
  readonly maxBodyBytes: number;
  /** Aborts of the generations in flight, so that closing the server can end them. */
  readonly #inFlight = new Set<AbortController>();
  /** The handlers running, with their requests, so that closing the server can wait for their responses to end. */
  readonly #handlers = new Map<Promise<void>, IncomingMessage>();
  #closing = false;

  constructor(engine: Engine, modelName: string, maxBodyBytes: number) {
    this.engine = engine;
    this.modelName = modelName;
    this.maxBodyBytes = maxBodyBytes;
    this.tokenTexts = new TokenTexts(engine);
  }

  /** Whether the server is closing: new requests are refused. */
  get closing(): boolean {
    return this.#closing;
  }

  /** Requests being handled now. */
  get activeRequests(): number {
    return this.#handlers.size;
  }

  /** Records a generation in flight (aborted at once when the server is closing); the returned function forgets it. */
  track(controller: AbortController): () => void {
    if (this.#closing) controller.abort();
    this.#inFlight.add(controller);
    return () => void this.#inFlight.delete(controller);
  }

  /** Records the running handler of `req` until it settles. */
  running(req: IncomingMessage, handler: Promise<void>): void {
    this.#handlers.set(handler, req);
    handler.finally(() => this.#handlers.delete(handler)).catch(() => {}); // handlers answer their own failures
  }

  /**
   * Reports a failure that is not the client's (an engine failure, a bug): clients get a 500 without the internals,
   * so the details go to the server's stderr.
   */
  report(error: unknown): void {
    console.error('vtengine server: a request failed:', error);
  }

  /**
   * Refuses new requests, aborts the generations in flight and resolves once every handler has answered. A request
   * whose body is still arriving is cut off: it has started nothing, and a slow sender must not hold the close up.
   */
  async drain(): Promise<void> {
    this.#closing = true;
    for (const controller of this.#inFlight) controller.abort();
    for (const req of this.#handlers.values()) if (!req.complete) req.destroy();
    while (this.#handlers.size > 0) await Promise.allSettled([...this.#handlers.keys()]);
  }
}

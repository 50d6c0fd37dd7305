/**
 * A server-sent events response as the OpenAI API streams: `data: <json>\n\n` events, ending with `data: [DONE]`.
 * @internal
 * @module
 */
import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import type { ApiError } from './api-error.js';

/**
 * The event stream of one response. A write waits while the socket's buffer is full, so unsent bytes do not pile up
 * for a client that reads slowly; its tokens wait in its Generation's queue meanwhile, at most the generation's
 * `highWaterMark` (256) of them: its request then pauses in the engine until the client catches up (see Generation).
 * @internal
 */
export class EventStream {
  readonly #res: ServerResponse;

  /** Starts the response: status 200 and the event-stream headers, sent at once so the client sees the stream open. */
  constructor(res: ServerResponse, headers: Record<string, string> = {}) {
    this.#res = res;
    res.writeHead(200, {
      ...headers,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      // Proxies such as nginx buffer responses by default, which would hold tokens back until the end.
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
  }

  /** Whether the client has gone (or the stream has ended): nothing more can be sent. */
  get closed(): boolean {
    return this.#res.writableEnded || this.#res.destroyed;
  }

  /** Sends one event; resolves once the socket can take more. */
  async send(data: unknown): Promise<void> {
    await this.#write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** Sends a failure in the stream, as the OpenAI API does once the response has started: an event with `error`. */
  async fail(error: ApiError): Promise<void> {
    await this.send(error.body());
    this.#res.end();
  }

  /** Ends the stream with the `[DONE]` event. */
  end(): void {
    if (!this.closed) this.#res.end('data: [DONE]\n\n');
  }

  async #write(text: string): Promise<void> {
    if (this.closed) return;
    if (this.#res.write(text)) return;
    // 'close' also ends the wait: a client that goes away never drains. Both listeners go once either fires.
    const done = new AbortController();
    const { signal } = done;
    await Promise.race([once(this.#res, 'drain', { signal }), once(this.#res, 'close', { signal })]).catch(() => {});
    done.abort();
  }
}

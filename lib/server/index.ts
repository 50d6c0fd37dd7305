/**
 * `vtengine/server`: an OpenAI-compatible HTTP server over a loaded `Engine`, on Node's own `node:http`.
 * `vtengine serve` runs the same server from the command line.
 *
 * @example
 * ```ts
 * import { Engine } from 'vtengine';
 * import { createServer } from 'vtengine/server';
 *
 * const engine = await Engine.load('./models/Qwen3-0.6B');
 * const server = createServer(engine, { modelName: 'qwen3-0.6b' });
 * console.log((await server.listen()).url); // http://127.0.0.1:8080/v1
 * ```
 * @module
 */
export { Server, type ServerAddress, createServer } from './server.js';
export type { ServerOptions } from './options.js';

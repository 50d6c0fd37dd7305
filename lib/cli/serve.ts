/**
 * `vtengine serve [--model DIR]`: the OpenAI-compatible HTTP server (`vtengine/server`) over one loaded model,
 * until Ctrl-C or SIGTERM.
 * @internal
 * @module
 */
import { basename, resolve } from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { AbortError } from '../errors.js';
import { isLoopbackAddress } from '../server/loopback.js';
import { SERVER_DEFAULTS } from '../server/options.js';
import { createServer } from '../server/server.js';
import { onInterrupt } from './interrupt.js';
import { loadEngine } from './load.js';
import { type LoadFlags, addLoadOptions } from './options.js';

interface ServeFlags extends LoadFlags {
  host: string;
  port: number;
  apiKey?: string;
  modelName?: string;
  allowUnauthenticated?: boolean;
}

/** Adds the `serve` command to the program. @internal */
export function addServeCommand(program: Command): void {
  const cmd = program
    .command('serve')
    .description('serve a model over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, /v1/models)');
  addLoadOptions(cmd)
    .option('--host <host>', 'address to listen on; any but loopback needs --api-key or --allow-unauthenticated', SERVER_DEFAULTS.host)
    .option('-p, --port <port>', 'TCP port (0 picks a free one)', portNumber, SERVER_DEFAULTS.port)
    .addOption(
      new Option(
        '--api-key <key>',
        'key clients must send as "Authorization: Bearer <key>" (better in the environment: ps shows arguments)',
      ).env('VTENGINE_API_KEY'),
    )
    .option('--model-name <name>', 'the model id clients name in "model" (default: the model folder\'s name)')
    .option('--allow-unauthenticated', 'listen on a non-loopback host without an API key (a trusted network only)')
    .addHelpText(
      'after',
      '\nPrints the base URL (for an OpenAI client\'s baseURL) on stdout once listening. Ctrl-C or SIGTERM stops it: ' +
        'requests in flight are ended, then the model is freed.\nDetails: docs/server.md.',
    )
    .action((flags: ServeFlags) => serve(flags));
}

async function serve(flags: ServeFlags): Promise<void> {
  const interrupt = onInterrupt();
  // SIGTERM (docker stop, systemd) stops the server as Ctrl-C does; a second signal of either kind exits at once.
  const onSigterm = (): void => void process.emit('SIGINT');
  process.on('SIGTERM', onSigterm);
  try {
    const engine = await loadEngine(flags, interrupt.signal);
    try {
      const server = createServer(engine, {
        host: flags.host,
        port: flags.port,
        apiKey: flags.apiKey,
        modelName: flags.modelName ?? (flags.model ? basename(resolve(flags.model)) : 'default'),
        allowUnauthenticated: flags.allowUnauthenticated === true,
      });
      const { host, url } = await server.listen();
      if (!isLoopbackAddress(host) && flags.apiKey === undefined && !flags.quiet) {
        process.stderr.write(`warning: listening on ${host} without an API key: anyone who reaches this port can run the model.\n`);
      }
      process.stdout.write(`serving "${server.modelName}" at ${url}\n`);
      if (!interrupt.signal.aborted) await new Promise((done) => interrupt.signal.addEventListener('abort', done, { once: true }));
      if (!flags.quiet) process.stderr.write('stopping: ending the requests in flight\n');
      await server.close();
    } finally {
      await engine.dispose();
    }
  } catch (err) {
    if (err instanceof AbortError && interrupt.signal.aborted) {
      process.exitCode = 130; // interrupted while loading
      return;
    }
    throw err;
  } finally {
    process.off('SIGTERM', onSigterm);
    interrupt.release();
  }
}

function portNumber(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 65535) throw new InvalidArgumentError('Expected a port number from 0 to 65535.');
  return n;
}

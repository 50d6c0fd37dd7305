#!/usr/bin/env node
/**
 * The `vtengine` command: `run`, `chat`, `serve`, `inspect` and `doctor`. Errors print as `error [CODE]: message` on stderr
 * with exit code 1 (an EngineError: never a stack trace) or 2 (a usage error).
 * @internal
 * @module
 */
import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { EngineError } from '../errors.js';
import { addChatCommand } from './chat.js';
import { addDoctorCommand } from './doctor.js';
import { addInspectCommand } from './inspect.js';
import { addRunCommand } from './run.js';
import { addServeCommand } from './serve.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

/** Commander's own exits that are not failures. */
const CLEAN_EXITS = new Set(['commander.helpDisplayed', 'commander.version']);

const program = new Command('vtengine')
  .description('Run LLMs from Hugging Face checkpoint folders, on vtengine\'s native engine.')
  .version(version, '-V, --version', 'print the version')
  .helpOption('-h, --help', 'show help for a command')
  .exitOverride()
  .configureOutput({ outputError: (message, write) => write(usageMessage(message)) })
  .showHelpAfterError('(add --help for usage)');
addRunCommand(program);
addChatCommand(program);
addServeCommand(program);
addInspectCommand(program);
addDoctorCommand(program);
program.addHelpText('after', '\nExamples:\n  vtengine run "def fibonacci(n):"\n  vtengine run --model ./Qwen3-0.6B --max-tokens 64 "Hello"\n  vtengine chat --model ./Qwen3-0.6B\n  vtengine serve --model ./Qwen3-0.6B --port 8080\n  vtengine inspect ./Qwen3-0.6B --json\n  vtengine doctor');

try {
  await program.parseAsync(process.argv);
} catch (err) {
  process.exitCode = report(err);
}

/** Prints a failure the way the CLI promises and returns the exit code. */
function report(err: unknown): number {
  if (err instanceof CommanderError) {
    if (CLEAN_EXITS.has(err.code)) return 0;
    if (err.code === 'vtengine.usage') process.stderr.write(usageMessage(err.message));
    return 2; // commander printed its own message through outputError
  }
  if (err instanceof EngineError) {
    process.stderr.write(`error [${err.code}]: ${err.message}\n`);
    return 1;
  }
  const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
  process.stderr.write(`error [ERR_INTERNAL]: ${detail}\nThis is a bug in vtengine; please report it.\n`);
  return 1;
}

/** Commander's "error: ..." as the CLI's "error [ERR_USAGE]: ...". */
function usageMessage(message: string): string {
  const text = message.replace(/^error: /, '').trimEnd();
  return `error [ERR_USAGE]: ${text}\n`;
}

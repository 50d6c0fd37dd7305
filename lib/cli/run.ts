/**
 * `vtengine run [--model DIR] PROMPT`: one generation, streamed to stdout.
 * @internal
 * @module
 */
import { type Command, CommanderError } from 'commander';
import type { Engine } from '../engine/engine.js';
import { AbortError, NoTokenizerError } from '../errors.js';
import type { Generation } from '../generation/generation.js';
import type { GenerateInput, GenerateOptions } from '../generation/options.js';
import type { GenerationResult } from '../generation/result.js';
import { seconds } from './format.js';
import { onInterrupt } from './interrupt.js';
import { loadEngine } from './load.js';
import { type LoadFlags, type SamplingFlags, addLoadOptions, addSamplingOptions, generateOptionsOf } from './options.js';

interface RunFlags extends LoadFlags, SamplingFlags {
  tokens?: boolean;
  json?: boolean;
  echo?: boolean;
}

/** Adds the `run` command to the program. @internal */
export function addRunCommand(program: Command): void {
  const cmd = program
    .command('run')
    .description('generate a continuation of a prompt, streamed to stdout')
    .argument('<prompt>', 'the prompt: text, or comma-separated token ids with --tokens');
  addLoadOptions(cmd);
  addSamplingOptions(cmd, 256)
    .option('--tokens', 'the prompt is comma-separated token ids and the output is token ids (no tokenizer needed)')
    .option('--json', 'print one JSON object at the end (text, tokenIds, finishReason, usage, timings) instead of streaming')
    .option('--echo', 'print the prompt before the continuation (the default when stdout is a terminal)')
    .option('--no-echo', 'print only the continuation (the default when stdout is a pipe or a file)')
    .addHelpText('after', '\nCtrl-C stops the generation: what came is printed and the exit code is 130.')
    .action((prompt: string, flags: RunFlags) => run(prompt, flags));
}

async function run(prompt: string, flags: RunFlags): Promise<void> {
  const tokens = flags.tokens ? parseTokenIds(prompt) : undefined;
  const options = generateOptionsOf(flags);
  const interrupt = onInterrupt();
  const out = process.stdout;
  try {
    const engine = await loadEngine(flags, interrupt.signal);
    try {
      const gen = generate(engine, tokens ? { tokens } : { prompt }, { ...options, signal: interrupt.signal });
      if (!flags.json) {
        if (!tokens && (flags.echo ?? out.isTTY === true)) out.write(prompt);
        let separator = '';
        for await (const chunk of gen) {
          if (interrupt.stdoutClosed) continue;
          if (tokens) {
            if (chunk.tokenIds.length === 0) continue; // a last chunk that only carries held-back text
            out.write(separator + chunk.tokenIds.join(' '));
            separator = ' ';
          } else out.write(chunk.text ?? '');
        }
      }
      const result = await gen;
      if (interrupt.stdoutClosed) return;
      out.write(flags.json ? `${JSON.stringify(jsonOf(result))}\n` : '\n');
      if (!flags.quiet) process.stderr.write(summary(result));
      if (result.finishReason === 'abort') process.exitCode = 130;
    } finally {
      await engine.dispose();
    }
  } catch (err) {
    if (err instanceof AbortError && interrupt.signal.aborted) {
      process.exitCode = interrupt.stdoutClosed ? 0 : 130; // interrupted while loading
      return;
    }
    throw err;
  } finally {
    interrupt.release();
  }
}

/** engine.generate, with the CLI's advice when a text prompt meets a checkpoint without a tokenizer. */
function generate(engine: Engine, input: GenerateInput, options: GenerateOptions): Generation {
  try {
    return engine.generate(input, options);
  } catch (err) {
    if (!(err instanceof NoTokenizerError)) throw err;
    throw new NoTokenizerError(
      'This checkpoint has no tokenizer (tokenizer.json), so the prompt cannot be text. Give it as token ids with ' +
        '--tokens (e.g. --tokens "1,2,3"), or copy the model\'s tokenizer.json and tokenizer_config.json into its folder.',
      { cause: err },
    );
  }
}

function parseTokenIds(prompt: string): number[] {
  if (!/^\s*\d+(\s*,\s*\d+)*\s*$/.test(prompt)) {
    throw new CommanderError(
      2,
      'vtengine.usage',
      `With --tokens the prompt must be comma-separated token ids such as "9707,11,1879", got ${JSON.stringify(prompt)}.`,
    );
  }
  return prompt.split(',').map((id) => Number(id.trim()));
}

function jsonOf(result: GenerationResult): object {
  const { tokenIds, finishReason, usage, timings } = result;
  return { text: result.text ?? null, tokenIds, finishReason, usage, timings };
}

function summary({ finishReason, usage, timings }: GenerationResult): string {
  const speed = timings.tokensPerSecond > 0 ? `, ${timings.tokensPerSecond.toFixed(1)} tok/s` : '';
  return `${usage.completionTokens} tokens in ${seconds(timings.totalMs)}${speed} (finish: ${finishReason})\n`;
}

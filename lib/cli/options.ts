/**
 * The flags `run` and `chat` share: where the model is and how to load it, and how to sample. Each value is
 * checked as it is parsed, by the same validators the API uses, so a bad flag is a usage error (exit 2) before
 * any model is loaded.
 * @internal
 * @module
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import type { DeviceOption, LoadOptions } from '../engine/load-options.js';
import { validateLoadOptions } from '../engine/load-options.js';
import { EngineError } from '../errors.js';
import type { GenerateOptions } from '../generation/options.js';
import { validateGenerateOptions, validateTextOptions } from '../generation/options.js';

/** The flags of `run` and `chat` that `loadEngine` reads. @internal */
export interface LoadFlags {
  model?: string;
  device?: DeviceOption;
  threads?: number;
  maxContext?: number;
  /** false with --no-cuda-graphs (commander sets it true otherwise). */
  cudaGraphs?: boolean;
  languageModelOnly?: boolean;
  quiet?: boolean;
}

/** The sampling flags of `run` and `chat`. @internal */
export interface SamplingFlags {
  maxTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
  repetitionPenalty?: number;
  stop?: string[];
}

/** Adds --model, --device, --threads, --max-context, --no-cuda-graphs and --quiet. @internal */
export function addLoadOptions(cmd: Command): Command {
  return cmd
    .option('-m, --model <dir>', 'Hugging Face checkpoint folder (default: the packaged default model)')
    .addOption(new Option('--device <device>', 'where to run the model').choices(['auto', 'cpu', 'cuda']))
    .option('--threads <n>', 'CPU threads (default: all cores)', checked((n) => validateLoadOptions({ threads: n })))
    .option(
      '--max-context <n>',
      'tokens per sequence, prompt + output (default: the model\'s, capped at 8192)',
      checked((n) => validateLoadOptions({ maxContext: n })),
    )
    .option('--no-cuda-graphs', 'decode without CUDA graphs (the CUDA backend uses them by default)')
    .option('--language-model-only', "a multimodal checkpoint's language model alone: its vision tower is never read")
    .option('-q, --quiet', 'print nothing on stderr but errors');
}

/** Adds the sampling flags; `maxTokensDefault` is shown in the help and used when the flag is absent. @internal */
export function addSamplingOptions(cmd: Command, maxTokensDefault: number): Command {
  const generate = (key: keyof GenerateOptions) => checked((n) => validateGenerateOptions({ [key]: n }));
  return cmd
    .option('-n, --max-tokens <n>', 'most tokens to generate', generate('maxTokens'), maxTokensDefault)
    .option('-t, --temperature <t>', 'sampling temperature, 0 = greedy (default: as generation_config.json says; greedy without one)', generate('temperature'))
    .option('--top-k <k>', 'sample among the k most likely tokens (0 = off)', generate('topK'))
    .option('--top-p <p>', 'nucleus sampling threshold in (0, 1] (1 = off)', generate('topP'))
    .option('--min-p <p>', 'drop tokens below p × the top probability (0 = off)', generate('minP'))
    .option('--seed <n>', 'sampler seed: the same seed gives the same output', generate('seed'))
    .option('--repetition-penalty <x>', 'above 1 discourages repeating tokens (1 = off)', generate('repetitionPenalty'))
    .option('--stop <text>', 'end the generation where the text reaches this string (repeatable)', collectStop);
}

/** The load options the flags ask for. @internal */
export function loadOptionsOf(flags: LoadFlags): LoadOptions {
  const options: LoadOptions = {};
  if (flags.device !== undefined) options.device = flags.device;
  if (flags.threads !== undefined) options.threads = flags.threads;
  if (flags.maxContext !== undefined) options.maxContext = flags.maxContext;
  if (flags.cudaGraphs === false) options.cudaGraphs = false;
  if (flags.languageModelOnly) options.languageModelOnly = true;
  return options;
}

/** The generate() options the flags ask for. @internal */
export function generateOptionsOf(flags: SamplingFlags): GenerateOptions {
  const options: GenerateOptions = {};
  for (const key of ['maxTokens', 'temperature', 'topK', 'topP', 'minP', 'seed', 'repetitionPenalty'] as const) {
    if (flags[key] !== undefined) options[key] = flags[key];
  }
  if (flags.stop) options.stop = flags.stop;
  return options;
}

/** Collects repeated --stop flags, checked as generate() checks its `stop` option. */
function collectStop(value: string, previous: string[] | undefined): string[] {
  const stop = [...(previous ?? []), value];
  try {
    validateTextOptions({ stop });
  } catch (err) {
    if (err instanceof EngineError) throw new InvalidArgumentError(err.message);
    throw err;
  }
  return stop;
}

/** A numeric flag parser that runs `check` (which throws an EngineError) and reports its message as a usage error. */
function checked(check: (n: number) => unknown): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('Expected a number.');
    try {
      check(n);
    } catch (err) {
      if (err instanceof EngineError) throw new InvalidArgumentError(err.message);
      throw err;
    }
    return n;
  };
}

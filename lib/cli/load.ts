/**
 * Loading an engine for `run` and `chat`: the model folder (or the packaged default), a progress bar on stderr
 * when stderr is a terminal and plain lines otherwise.
 * @internal
 * @module
 */
import { existsSync } from 'node:fs';
import { SingleBar } from 'cli-progress';
import { DEFAULT_MODEL_DIR } from '../engine/default-model.js';
import { Engine } from '../engine/engine.js';
import { ModelNotFoundError } from '../errors.js';
import { compact, seconds } from './format.js';
import { type LoadFlags, loadOptionsOf } from './options.js';

/** Loads the model the flags name, reporting progress on stderr unless `--quiet`. @internal */
export async function loadEngine(flags: LoadFlags, signal: AbortSignal): Promise<Engine> {
  const dir = flags.model ?? defaultModel();
  const quiet = flags.quiet === true;
  const bar = !quiet && process.stderr.isTTY ? progressBar() : undefined;
  const startedAt = performance.now();
  if (bar) bar.start(100, 0, { stage: 'starting' });
  else if (!quiet) process.stderr.write(`loading ${dir}\n`);
  let engine: Engine;
  try {
    engine = await Engine.load(dir, {
      ...loadOptionsOf(flags),
      signal,
      onProgress: bar ? ({ fraction, stage }) => bar.update(Math.round(fraction * 100), { stage }) : undefined,
    });
  } finally {
    bar?.stop();
  }
  if (!quiet) {
    const { architecture, nParams, dtype, device } = engine.modelInfo;
    const took = seconds(performance.now() - startedAt);
    process.stderr.write(`loaded ${architecture} (${compact(nParams)} params, ${dtype}) on ${device} in ${took}\n`);
  }
  return engine;
}

function defaultModel(): string {
  if (existsSync(`${DEFAULT_MODEL_DIR}/config.json`)) return DEFAULT_MODEL_DIR;
  throw new ModelNotFoundError(
    `No --model was given and the default model is not installed (${DEFAULT_MODEL_DIR} is missing). ` +
      'Pass --model DIR with a Hugging Face checkpoint folder (config.json + *.safetensors).',
  );
}

function progressBar(): SingleBar {
  return new SingleBar({
    stream: process.stderr,
    format: 'loading [{bar}] {percentage}% {stage}',
    barsize: 30,
    hideCursor: true,
    clearOnComplete: true,
    noTTYOutput: false,
  });
}

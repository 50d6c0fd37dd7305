#!/usr/bin/env node
// Child process of the checkpoint fuzzer: loads one mutant checkpoint and runs short generations on it, the way an
// application would (token ids, then a prompt and a chat turn when it has a tokenizer), and reports what happened
// as JSON lines on stdout ("@@fuzz {...}"). The parent owns the verdict: this process only says how far it got,
// so a crash or a hang still shows the last phase it reached.
//
//   node scripts/fuzz/worker.mjs <engine bundle> <checkpoint dir>
import { pathToFileURL } from 'node:url';

const [bundle, dir] = process.argv.slice(2);
const report = (msg) => process.stdout.write(`@@fuzz ${JSON.stringify(msg)}\n`);

const { Engine, EngineError } = await import(pathToFileURL(bundle).href);

/** Feature-absent errors of the optional text phases: a checkpoint without a tokenizer or template is fine. */
const ABSENT = new Set(['ERR_NO_TOKENIZER', 'ERR_NO_CHAT_TEMPLATE']);

/** A generation whose ids are not token ids of the model is an engine bug, not a checkpoint error. */
function checkIds(ids, vocabSize, phase) {
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= vocabSize);
  if (bad !== undefined) {
    const err = new Error(`${phase}: generated id ${bad} is outside the vocabulary [0, ${vocabSize})`);
    err.name = 'InvalidOutputError';
    throw err;
  }
}

async function run(engine, phase, input) {
  report({ phase });
  const result = await engine.generate(input, { maxTokens: 4 });
  checkIds(result.tokenIds, engine.modelInfo.vocabSize, phase);
  return { finish: result.finishReason, ids: result.tokenIds };
}

let phase = 'load';
let engine;
try {
  report({ phase });
  engine = await Engine.load(dir, { device: 'cpu', threads: 1 });
  const out = {};
  phase = 'generate';
  out.generate = await run(engine, phase, { tokens: [1, 2, 3] });
  for (const [name, input] of [
    ['prompt', { prompt: 'def main():' }],
    ['chat', { messages: [{ role: 'user', content: 'Hi' }] }],
  ]) {
    phase = name;
    try {
      out[name] = await run(engine, phase, input);
    } catch (err) {
      if (!(err instanceof EngineError && ABSENT.has(err.code))) throw err;
      out[name] = { absent: err.code };
    }
  }
  phase = 'dispose';
  report({ phase });
  await engine.dispose();
  report({ outcome: 'loaded', ...out });
} catch (err) {
  report({
    outcome: 'error',
    phase,
    engineError: err instanceof EngineError,
    code: err?.code ?? null,
    name: err?.name ?? typeof err,
    message: String(err?.message ?? err).slice(0, 500),
  });
  if (engine) await engine.dispose().catch(() => {});
}

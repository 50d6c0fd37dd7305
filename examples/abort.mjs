// Stop a generation early, two ways. Either way it is not an error: awaiting the generation gives the tokens
// generated so far with finishReason 'abort', and the engine frees the request's memory at once.
//
//   node examples/abort.mjs [MODEL_DIR] [PROMPT]
//
// MODEL_DIR: a Hugging Face checkpoint folder (default: the packaged default model).
// PROMPT: text; comma-separated numbers ("9707,11,1879") are token ids, for checkpoints without a tokenizer.
import { DEFAULT_MODEL_DIR, Engine } from 'vtengine';

const [modelDir, prompt = 'def fibonacci(n):'] = process.argv.slice(2);
const tokens = /^\d+(,\d+)*$/.test(prompt) ? prompt.split(',').map(Number) : undefined;
const input = tokens ? { tokens } : { prompt };
const show = (result) => (tokens ? result.tokenIds.join(' ') : JSON.stringify(result.text));

const engine = await Engine.load(modelDir ?? DEFAULT_MODEL_DIR); // an unset path is an error, not the default
try {
  // 1. An AbortSignal: from a "stop" button, a closed HTTP request, or AbortSignal.timeout(ms).
  const controller = new AbortController();
  const gen = engine.generate(input, { maxTokens: 500, signal: controller.signal });
  let seen = 0;
  gen.on('token', () => {
    if (++seen === 8) controller.abort(); // the user pressed "stop"
  });
  const stopped = await gen;
  console.log(`signal: ${stopped.finishReason} after ${stopped.tokenIds.length} tokens: ${show(stopped)}`);

  // 2. Leaving a for-await loop early (break, return or a throw) aborts the generation too.
  const gen2 = engine.generate(input, { maxTokens: 500 });
  let taken = 0;
  for await (const chunk of gen2) {
    taken += chunk.tokenIds.length;
    if (taken >= 8) break;
  }
  const broken = await gen2;
  console.log(`break: ${broken.finishReason} after ${broken.tokenIds.length} tokens: ${show(broken)}`);
} finally {
  await engine.dispose();
}

// Generate a completion and print it, with why it ended and how fast it was.
//
//   node examples/generate.mjs [MODEL_DIR] [PROMPT]
//
// MODEL_DIR: a Hugging Face checkpoint folder (default: the packaged default model).
// PROMPT: text; comma-separated numbers ("9707,11,1879") are token ids, for checkpoints without a tokenizer.
import { DEFAULT_MODEL_DIR, Engine } from 'vtengine';

const [modelDir, prompt = 'def fibonacci(n):'] = process.argv.slice(2);
const tokens = /^\d+(,\d+)*$/.test(prompt) ? prompt.split(',').map(Number) : undefined;

const engine = await Engine.load(modelDir ?? DEFAULT_MODEL_DIR); // an unset path is an error, not the default
try {
  // Awaiting a generation gives the whole result. temperature 0 (the default) is greedy: the same output each run.
  const result = await engine.generate(tokens ? { tokens } : { prompt }, { maxTokens: 24, temperature: 0 });

  console.log(tokens ? result.tokenIds.join(' ') : prompt + result.text);
  const { finishReason, usage, timings } = result;
  console.log(`finish: ${finishReason}, ${usage.promptTokens} prompt + ${usage.completionTokens} generated tokens`);
  console.log(`first token after ${timings.prefillMs.toFixed(1)} ms, then ${timings.tokensPerSecond.toFixed(1)} tokens/s`);
} finally {
  await engine.dispose();
}

// Run several generations at once: the engine batches them into the same steps (continuous batching), so
// together they take about as long as the longest one alone.
//
//   node examples/batch.mjs [MODEL_DIR] [PROMPT...]
//
// MODEL_DIR: a Hugging Face checkpoint folder (default: the packaged default model).
// PROMPT: text; comma-separated numbers ("9707,11,1879") are token ids, for checkpoints without a tokenizer.
import { DEFAULT_MODEL_DIR, Engine } from 'vtengine';

const [modelDir, ...args] = process.argv.slice(2);
const prompts = args.length > 0 ? args : ['def fibonacci(n):', 'class Stack:', 'import os\n\ndef main():'];
const inputOf = (p) => (/^\d+(,\d+)*$/.test(p) ? { tokens: p.split(',').map(Number) } : { prompt: p });

const engine = await Engine.load(modelDir ?? DEFAULT_MODEL_DIR); // an unset path is an error, not the default
try {
  const started = performance.now();
  // generate() returns at once; start them all, then wait for all of them.
  const results = await Promise.all(prompts.map((p) => engine.generate(inputOf(p), { maxTokens: 24 })));
  const ms = performance.now() - started;

  results.forEach((result, i) => {
    const output = 'tokens' in inputOf(prompts[i]) ? result.tokenIds.join(' ') : JSON.stringify(result.text);
    console.log(`[${i}] ${output}`);
  });
  const generated = results.reduce((n, r) => n + r.usage.completionTokens, 0);
  console.log(`${results.length} generations, ${generated} tokens in ${ms.toFixed(0)} ms, ${engine.stats().steps} engine steps`);
} finally {
  await engine.dispose();
}

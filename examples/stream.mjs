// Stream a completion to stdout as it is generated.
//
//   node examples/stream.mjs [MODEL_DIR] [PROMPT]
//
// MODEL_DIR: a Hugging Face checkpoint folder (default: the packaged default model).
// PROMPT: text; comma-separated numbers ("9707,11,1879") are token ids, for checkpoints without a tokenizer.
import { DEFAULT_MODEL_DIR, Engine } from 'vtengine';

const [modelDir, prompt = 'def fibonacci(n):'] = process.argv.slice(2);
const tokens = /^\d+(,\d+)*$/.test(prompt) ? prompt.split(',').map(Number) : undefined;

const engine = await Engine.load(modelDir ?? DEFAULT_MODEL_DIR); // an unset path is an error, not the default
try {
  const gen = engine.generate(tokens ? { tokens } : { prompt }, { maxTokens: 24 });

  // A generation is an async iterable of chunks. A chunk's text never ends inside a UTF-8 character, and the
  // chunks' texts add up to the result's text.
  if (!tokens) process.stdout.write(prompt);
  for await (const chunk of gen) {
    process.stdout.write(tokens ? `${chunk.tokenIds.join(' ')} ` : chunk.text);
  }

  // It is also a promise of the result, which is ready once the loop ends.
  const { finishReason, usage } = await gen;
  console.log(`\n[${finishReason}, ${usage.completionTokens} tokens]`);
} finally {
  await engine.dispose();
}

// A conversation: the history is a list of messages, each reply is streamed, then added to the history.
// Needs a checkpoint with a tokenizer and a chat template (an instruction-tuned model such as Qwen3-0.6B).
//
//   node examples/chat.mjs [MODEL_DIR] [QUESTION...]
//
// MODEL_DIR: a Hugging Face checkpoint folder (default: the packaged default model).
import { DEFAULT_MODEL_DIR, Engine } from 'vtengine';

const [modelDir, ...args] = process.argv.slice(2);
const questions = args.length > 0 ? args : ['What does a Python generator do?', 'Show me a short example.'];

const engine = await Engine.load(modelDir ?? DEFAULT_MODEL_DIR); // an unset path is an error, not the default
try {
  const messages = [{ role: 'system', content: 'You are a helpful assistant. Answer briefly.' }];
  for (const question of questions) {
    messages.push({ role: 'user', content: question });
    console.log(`> ${question}`);

    // The engine renders the checkpoint's chat template over the whole history and tokenizes the result.
    const reply = engine.generate({ messages }, { maxTokens: 64 });
    for await (const chunk of reply) process.stdout.write(chunk.text);
    const { text } = await reply;
    process.stdout.write('\n');

    messages.push({ role: 'assistant', content: text });
  }
} finally {
  await engine.dispose();
}

/**
 * `vtengine chat [--model DIR]`: an interactive chat that keeps its history as messages and streams each reply.
 * Ctrl-C during a reply stops that reply only; Ctrl-C or Ctrl-D at an empty prompt ends the chat.
 * @internal
 * @module
 */
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import type { ChatMessage } from '../chat/template.js';
import type { Engine } from '../engine/engine.js';
import { AbortError, ContextOverflowError, EngineError, NoChatTemplateError, NoTokenizerError } from '../errors.js';
import type { Generation } from '../generation/generation.js';
import { loadEngine } from './load.js';
import { type LoadFlags, type SamplingFlags, addLoadOptions, addSamplingOptions, generateOptionsOf } from './options.js';

interface ChatFlags extends LoadFlags, SamplingFlags {
  system?: string;
}

const HELP = '/reset clears the history, /exit quits; Ctrl-C stops a reply, Ctrl-C or Ctrl-D at an empty prompt quits';

/** Adds the `chat` command to the program. @internal */
export function addChatCommand(program: Command): void {
  const cmd = program.command('chat').description('chat with a model interactively (needs a tokenizer and a chat template)');
  addLoadOptions(cmd);
  addSamplingOptions(cmd, 1024)
    .option('-s, --system <text>', 'a system message to start the chat with')
    .addHelpText('after', `\nIn the chat: ${HELP}.`)
    .action((flags: ChatFlags) => chat(flags));
}

async function chat(flags: ChatFlags): Promise<void> {
  const options = generateOptionsOf(flags);
  const loading = new AbortController();
  const stopLoading = (): void => loading.abort();
  process.once('SIGINT', stopLoading);
  let engine: Engine;
  try {
    engine = await loadEngine(flags, loading.signal);
  } catch (err) {
    if (!(err instanceof AbortError && loading.signal.aborted)) throw err;
    process.exitCode = 130; // Ctrl-C while loading
    return;
  } finally {
    process.off('SIGINT', stopLoading);
  }
  const interactive = process.stdin.isTTY === true;
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: interactive, prompt: '> ' });
  let reply: Generation | undefined;
  // In a terminal readline turns Ctrl-C into its 'SIGINT' event; from a pipe it is a real signal.
  const interrupt = (): void => {
    if (reply) reply.abort();
    else if (rl.line.length > 0) {
      rl.write(null, { ctrl: true, name: 'e' });
      rl.write(null, { ctrl: true, name: 'u' });
    } else rl.close();
  };
  rl.on('SIGINT', interrupt);
  process.on('SIGINT', interrupt);
  const prompt = (): void => {
    if (interactive) rl.prompt();
  };

  try {
    checkChatSupport(engine);
    const history: ChatMessage[] = flags.system ? [{ role: 'system', content: flags.system }] : [];
    if (interactive && !flags.quiet) process.stderr.write(`${HELP}.\n`);
    let exited = false;
    prompt();
    for await (const line of rl) {
      const command = line.trim();
      if (command === '/exit') {
        exited = true;
        break;
      }
      if (command === '/reset') {
        history.length = flags.system ? 1 : 0;
        if (!flags.quiet) process.stderr.write('(history cleared)\n');
      } else if (command !== '') {
        history.push({ role: 'user', content: line });
        try {
          reply = engine.generate({ messages: history }, options);
          for await (const chunk of reply) process.stdout.write(chunk.text ?? '');
          const result = await reply;
          process.stdout.write('\n');
          if (result.finishReason === 'abort' && !flags.quiet) process.stderr.write('(reply stopped)\n');
          // A stopped reply stays in the history as far as it came: that is what the user saw.
          history.push({ role: 'assistant', content: result.text ?? '' });
        } catch (err) {
          // One failed turn (a history too long for the context, say) does not end the chat.
          if (!(err instanceof EngineError)) throw err;
          history.pop();
          const hint = err instanceof ContextOverflowError ? ' (/reset starts a new chat)' : '';
          process.stderr.write(`error [${err.code}]: ${err.message}${hint}\n`);
        } finally {
          reply = undefined;
        }
      }
      prompt();
    }
    if (interactive && !exited) process.stdout.write('\n'); // Ctrl-C or Ctrl-D left the cursor after the prompt
  } finally {
    reply?.abort();
    rl.close();
    process.off('SIGINT', interrupt);
    await engine.dispose();
  }
}

/** Fails before the first prompt, not at the first reply, on a checkpoint that cannot chat. */
function checkChatSupport(engine: Engine): void {
  try {
    engine.applyChatTemplate([{ role: 'user', content: 'hello' }], { addGenerationPrompt: true });
  } catch (err) {
    const advice = 'Use a chat model, or "vtengine run" to continue a plain prompt.';
    if (err instanceof NoTokenizerError) {
      throw new NoTokenizerError(`vtengine chat needs a checkpoint with a tokenizer (tokenizer.json), and this one has none. ${advice}`, { cause: err });
    }
    if (err instanceof NoChatTemplateError) {
      throw new NoChatTemplateError(`vtengine chat needs a chat template, and this checkpoint's tokenizer has none. ${advice}`, { cause: err });
    }
    throw err;
  }
}

/**
 * What an engine knows of text: its checkpoint's tokenizer and chat template, and the end-of-turn ids they imply.
 * @module
 */
import { ChatTemplate, type ChatTemplateOptions } from '../chat/template.js';
import { NoChatTemplateError } from '../errors.js';
import { type InputForm, type ModelLimits, checkPromptIds } from '../generation/options.js';
import { TextOutput } from '../generation/text-output.js';
import { loadTokenizer, type TextTokenizer } from './tokenizer.js';

/**
 * Tokens that close a turn in the chat templates of common families. One of them counts as an end of sequence when
 * it is a special token of the tokenizer and the checkpoint's chat template writes it: a model that follows its
 * template ends its reply with it, even when `generation_config.json` names another EOS id (or none).
 */
const END_OF_TURN_TOKENS = [
  '<|im_end|>', // Qwen, ChatML
  '<|eot_id|>', // Llama 3
  '<|eom_id|>', // Llama 3.1 tool calls
  '<end_of_turn>', // Gemma
  '<|end|>', // Phi-3
  '<|return|>', // gpt-oss
  '<|END_OF_TURN_TOKEN|>', // Command R
  '<|end▁of▁sentence|>', // DeepSeek
];

/** The tokenizer and chat template of a loaded checkpoint. @internal */
export class TextLayer {
  readonly tokenizer: TextTokenizer;
  #template: ChatTemplate | undefined;

  private constructor(tokenizer: TextTokenizer) {
    this.tokenizer = tokenizer;
  }

  /** Reads `dir`'s tokenizer; undefined when the checkpoint has none (no tokenizer.json). */
  static async load(dir: string): Promise<TextLayer | undefined> {
    const tokenizer = await loadTokenizer(dir);
    return tokenizer && new TextLayer(tokenizer);
  }

  /** Whether the checkpoint has a chat template. */
  get hasChatTemplate(): boolean {
    return this.tokenizer.chatTemplate !== undefined;
  }

  tokenize(text: string, special: boolean): number[] {
    return this.tokenizer.encode(text, special);
  }

  detokenize(ids: readonly number[], skipSpecial: boolean): string {
    return this.tokenizer.decode(ids, skipSpecial);
  }

  applyChatTemplate(messages: unknown, options?: ChatTemplateOptions): string {
    return this.#chatTemplate().render(messages, options);
  }

  /**
   * The ids that end a generation by default: the model's EOS ids (config.json / generation_config.json), the
   * tokenizer's `eos_token`, and the end-of-turn tokens its chat template writes ({@link END_OF_TURN_TOKENS}).
   */
  stopTokenIds(modelEos: readonly number[]): number[] {
    const ids = new Set(modelEos);
    const eos = this.tokenizer.specialToken('eos_token');
    const eosId = eos === undefined ? undefined : this.tokenizer.tokenId(eos);
    if (eosId !== undefined) ids.add(eosId);
    const template = this.tokenizer.chatTemplate ?? '';
    for (const token of END_OF_TURN_TOKENS) {
      const id = this.tokenizer.tokenId(token);
      if (id !== undefined && this.tokenizer.specialIds.has(id) && template.includes(token)) ids.add(id);
    }
    return [...ids];
  }

  /** The prompt ids of a text input (see PromptInput and MessagesInput), checked against the model's limits. */
  promptIds(input: Exclude<InputForm, { form: 'tokens' }>, limits: ModelLimits): Int32Array {
    if (input.form === 'prompt') return checkPromptIds(this.tokenize(input.prompt, true), limits, 'prompt');
    const text = this.applyChatTemplate(input.messages, { ...input.templateVars, addGenerationPrompt: true });
    return checkPromptIds(this.tokenize(text, false), limits, 'chat');
  }

  /** The text side of a new generation. */
  textOutput(stop: readonly string[], skipSpecial: boolean): TextOutput {
    return new TextOutput(this.tokenizer, stop, skipSpecial);
  }

  #chatTemplate(): ChatTemplate {
    if (!this.#template) {
      const source = this.tokenizer.chatTemplate;
      if (source === undefined) {
        throw new NoChatTemplateError(
          'This checkpoint has no chat template (no chat_template in tokenizer_config.json, no chat_template.jinja), ' +
            'so it cannot format messages. Give the prompt as text with { prompt } instead, or add a template.',
        );
      }
      const extra = this.tokenizer.config.additional_special_tokens;
      const additional = Array.isArray(extra) ? extra.filter((t): t is string => typeof t === 'string') : [];
      this.#template = new ChatTemplate(source, (key) => this.tokenizer.specialToken(key), additional);
    }
    return this.#template;
  }
}

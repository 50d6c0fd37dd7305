/**
 * Chat templates: the checkpoint's Jinja template rendered with `@huggingface/jinja` the way transformers'
 * `apply_chat_template(tokenize=False)` renders it.
 * @module
 */
import { Template } from '@huggingface/jinja';
import { BadCheckpointError, InvalidOptionError } from '../errors.js';
import { optionsRecord, show } from '../validation.js';

/**
 * One message of a chat. `role` is usually `'system'`, `'user'`, `'assistant'` or `'tool'`; the template decides
 * which roles it accepts. Every field, these and any other, reaches the template as it is.
 */
export interface ChatMessage {
  /** Who speaks. */
  role: string;
  /** What is said: text, or whatever structure the template expects (a list of parts for multimodal templates). */
  content: string | readonly unknown[] | null;
  /** An assistant turn's reasoning, for templates that render it apart (Qwen3). */
  reasoning_content?: string;
  /** An assistant turn's tool calls, in the shape the template expects. */
  tool_calls?: readonly unknown[];
  /** A tool result's call id, for templates that use it. */
  tool_call_id?: string;
  /** A participant's or a tool's name, for templates that use it. */
  name?: string;
}

/**
 * Options of `engine.applyChatTemplate()`. Besides `addGenerationPrompt`, every field is passed to the template as
 * a variable under its own name, as transformers passes extra keyword arguments: `{ enable_thinking: false }` for
 * Qwen3, `{ tools: [...] }`, `{ documents: [...] }`.
 */
export interface ChatTemplateOptions {
  /**
   * End the rendering with the header of an assistant turn, so that the model's continuation is the reply (the
   * template's `add_generation_prompt`). Default `false` for `applyChatTemplate`, as in transformers; `generate()`
   * with `{ messages }` always sets it.
   */
  addGenerationPrompt?: boolean;
  /** Template variables, such as `enable_thinking`. */
  [variable: string]: unknown;
}

/** The keys of tokenizer_config.json whose token text transformers hands to every template (`special_tokens_map`). */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'];

/**
 * A parsed chat template, with the special-token variables of its tokenizer.
 * @internal
 */
export class ChatTemplate {
  readonly #template: Template;
  readonly #tokens: Record<string, unknown>;

  /**
   * @param source - the Jinja text.
   * @param specialToken - the text of a special token of tokenizer_config.json by key, or undefined.
   * @param additionalSpecialTokens - tokenizer_config.json's additional_special_tokens, as texts.
   */
  constructor(source: string, specialToken: (key: string) => string | undefined, additionalSpecialTokens: string[]) {
    try {
      this.#template = new Template(source);
    } catch (err) {
      throw new BadCheckpointError(
        `The checkpoint's chat template could not be parsed (${(err as Error).message}). Check chat_template in ` +
          'tokenizer_config.json (or chat_template.jinja).',
        { cause: err },
      );
    }
    const tokens: Record<string, unknown> = {};
    for (const key of SPECIAL_TOKEN_KEYS) {
      const text = specialToken(key);
      if (text !== undefined) tokens[key] = text;
    }
    if (additionalSpecialTokens.length > 0) tokens.additional_special_tokens = additionalSpecialTokens;
    this.#tokens = tokens;
  }

  /**
   * Renders `messages`. Context, as transformers builds it: the special tokens, `messages`, `tools` and `documents`
   * (undefined unless given), `add_generation_prompt`, then the caller's variables (which may override any of them).
   * @throws InvalidOptionError for malformed messages, or when the template itself raises (`raise_exception`: roles
   * that do not alternate, an unsupported role, ...).
   */
  render(messages: unknown, options?: unknown): string {
    validateMessages(messages);
    const o = optionsRecord(options, 'applyChatTemplate() options');
    const { addGenerationPrompt, ...variables } = o;
    if (addGenerationPrompt !== undefined && typeof addGenerationPrompt !== 'boolean') {
      throw new InvalidOptionError(`Option "addGenerationPrompt" must be a boolean, got ${show(addGenerationPrompt)}.`);
    }
    const context = {
      ...this.#tokens,
      messages,
      add_generation_prompt: addGenerationPrompt ?? false,
      ...variables,
    };
    try {
      return this.#template.render(context);
    } catch (err) {
      throw new InvalidOptionError(`The chat template refused these messages: ${(err as Error).message}`, { cause: err });
    }
  }
}

/** Messages must be a non-empty array of objects with a string role. */
function validateMessages(messages: unknown): asserts messages is ChatMessage[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new InvalidOptionError(`"messages" must be a non-empty array of { role, content } objects, got ${show(messages)}.`);
  }
  messages.forEach((m: unknown, i) => {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) {
      throw new InvalidOptionError(`messages[${i}] must be an object such as { role: 'user', content: 'Hi' }, got ${show(m)}.`);
    }
    const { role, content } = m as Record<string, unknown>;
    if (typeof role !== 'string' || role.length === 0) {
      throw new InvalidOptionError(`messages[${i}].role must be a non-empty string such as 'user', got ${show(role)}.`);
    }
    if (content !== undefined && content !== null && typeof content !== 'string' && !Array.isArray(content)) {
      throw new InvalidOptionError(`messages[${i}].content must be a string (or a list of parts), got ${show(content)}.`);
    }
    // An image or video part would be rendered as its placeholder tokens and the model would answer without seeing
    // it: refused, saying why, until the engine runs vision towers.
    if (Array.isArray(content))
      content.forEach((part: unknown, j) => {
        const type = part !== null && typeof part === 'object' ? (part as { type?: unknown }).type : undefined;
        if (typeof type === 'string' && /image|video/.test(type)) {
          throw new InvalidOptionError(
            `messages[${i}].content[${j}] is ${JSON.stringify(type)}: this version runs the language model alone ` +
              `(a multimodal checkpoint's vision tower is never loaded), so it cannot see images or video; send text parts.`,
          );
        }
      });
  });
}

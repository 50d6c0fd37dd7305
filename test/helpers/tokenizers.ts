// Reads the tokenizer fixtures (test/fixtures/tokenizers) and the references scripts/make_tokenizer_refs.py wrote
// with the HF tokenizers library and transformers on the GPU machine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChatMessage } from '../../lib/chat/template.js';

export const TOKENIZERS_DIR = fileURLToPath(new URL('../fixtures/tokenizers', import.meta.url));
/** Every tokenizer fixture. */
export const TOKENIZER_NAMES = ['qwen3', 'llama3', 'mistral'] as const;

export interface TokenizerCase {
  text: string;
  ids: number[];
  ids_special: number[];
  ids_split: number[];
  hf_ids: number[];
  hf_ids_special: number[];
  decoded: string;
  decoded_skip: string;
  hf_decoded: string;
}

export interface ChatReference {
  name: string;
  rendered?: string;
  ids?: number[];
  error?: string;
}

export interface TokenizerReference {
  tokenizer: string;
  tokenizers: string;
  transformers: string;
  cases: TokenizerCase[];
  chat: ChatReference[];
}

export interface ChatCase {
  name: string;
  messages: ChatMessage[];
  options: { add_generation_prompt: boolean } & Record<string, unknown>;
}

export function tokenizerDir(name: string): string {
  return join(TOKENIZERS_DIR, name);
}

export function readTokenizerReference(name: string): TokenizerReference {
  return JSON.parse(readFileSync(join(TOKENIZERS_DIR, name, 'reference.json'), 'utf8')) as TokenizerReference;
}

export function readChatCases(): ChatCase[] {
  return JSON.parse(readFileSync(join(TOKENIZERS_DIR, 'chat_cases.json'), 'utf8')) as ChatCase[];
}

/** transformers' keyword options of a chat case as applyChatTemplate takes them. */
export function templateOptions(options: ChatCase['options']): Record<string, unknown> {
  const { add_generation_prompt, ...vars } = options;
  return { addGenerationPrompt: add_generation_prompt, ...vars };
}

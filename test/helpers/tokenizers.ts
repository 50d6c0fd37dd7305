// Reads the tokenizer fixtures (test/fixtures/tokenizers) and the references scripts/make_tokenizer_refs.py wrote
// with the HF tokenizers library and transformers on the GPU machine.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { it } from 'vitest';
import type { ChatMessage } from '../../lib/chat/template.js';

export const TOKENIZERS_DIR = fileURLToPath(new URL('../fixtures/tokenizers', import.meta.url));
/** Every tokenizer fixture. */
export const TOKENIZER_NAMES = ['qwen3', 'cl100k', 'mistral'] as const;

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
  /** transformers' ids of the rendering. */
  ids?: number[];
  /** The tokenizers library's ids of the rendering (references made since cl100k replaced Llama 3). */
  ids_tokenizers?: number[];
  error?: string;
}

export interface TokenizerReference {
  tokenizer: string;
  tokenizers: string;
  transformers: string;
  transformers_class: string;
  /** Pipeline parts where transformers' backend differs from tokenizer.json (references made since cl100k). */
  transformers_rebuilt?: string[] | null;
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

/**
 * For a describe block over one fixture: its reference, or, when its reference.json has not been generated yet,
 * undefined after registering a test that fails saying so (the block's other tests then have nothing to run on).
 */
export function referenceOrFailingTest(name: string): TokenizerReference | undefined {
  const path = join(TOKENIZERS_DIR, name, 'reference.json');
  if (existsSync(path)) return readTokenizerReference(name);
  it('has its reference.json', () => {
    throw new Error(
      `${path} is missing: it is generated on the GPU machine by scripts/gpu-tokenizer-refs.sh ` +
        '(scripts/make_tokenizer_refs.py with the HF tokenizers library and transformers); never written by hand.',
    );
  });
  return undefined;
}

export function readChatCases(): ChatCase[] {
  return JSON.parse(readFileSync(join(TOKENIZERS_DIR, 'chat_cases.json'), 'utf8')) as ChatCase[];
}

/** transformers' keyword options of a chat case as applyChatTemplate takes them. */
export function templateOptions(options: ChatCase['options']): Record<string, unknown> {
  const { add_generation_prompt, ...vars } = options;
  return { addGenerationPrompt: add_generation_prompt, ...vars };
}

/** Unicode White_Space: what `\s` is in the Rust `tokenizers` regexes (JS's `\s` adds U+FEFF and lacks U+0085). */
const WS = '\\p{White_Space}';
/** tokenizer.json's Split regex in cl100k (the tiktoken cl100k_base pattern, Llama 3's too). */
const CL100K_SPLIT = new RegExp(
  `'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^${WS}\\p{L}\\p{N}]+[\\r\\n]*` +
    `|[${WS}]*[\\r\\n]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  'gu',
);
/** The GPT-2 regex of the ByteLevel pre-tokenizer (use_regex: true). */
const GPT2_SPLIT = new RegExp(
  `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`,
  'gu',
);

/**
 * Whether GPT-2's ByteLevel regex cuts `text` into other pieces than cl100k's Split regex, in the stretches between
 * the special tokens `specials` (matched before pre-tokenization).
 */
function gpt2SplitDiffers(text: string, specials: readonly string[]): boolean {
  const escaped = specials.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const parts = escaped.length > 0 ? text.split(new RegExp(escaped.join('|'), 'u')) : [text];
  return parts.some((p) => JSON.stringify(p.match(GPT2_SPLIT) ?? []) !== JSON.stringify(p.match(CL100K_SPLIT) ?? []));
}

/**
 * The fixtures on which transformers 5 (AutoTokenizer) does not follow tokenizer.json, and the strings on which its
 * ids may therefore differ. It rebuilds the pre-tokenizer from the class tokenizer_config.json names: for Mistral
 * (LlamaTokenizer) from `legacy` / `add_prefix_space`, which differs on leading or repeated spaces; for cl100k
 * (GPT2Tokenizer) a ByteLevel pre-tokenizer with GPT-2's regex instead of the file's cl100k Split, which differs
 * wherever the two regexes cut the text differently (digit runs, newlines after punctuation, `(word`, ...). The
 * references record both; vtengine follows tokenizer.json, as the tokenizers library (and every server) does.
 */
export const TRANSFORMERS_DIFFERS: Readonly<Record<string, (text: string, specials: readonly string[]) => boolean>> = {
  mistral: (text) => /^\s|\s{2}|<unk>/.test(text),
  cl100k: gpt2SplitDiffers,
};

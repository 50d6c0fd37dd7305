/**
 * The checkpoint's tokenizer: `tokenizer.json` (+ `tokenizer_config.json`) run by `@huggingface/tokenizers`, with
 * the semantics of the HF `tokenizers` library and transformers pinned down here (see lib/tokenizer/README.md).
 * @module
 */
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { parseCheckpointJson, readCheckpointText } from '../checkpoint-files.js';
import { BadCheckpointError } from '../errors.js';
import { type ByteLevelTable, buildByteLevelTable } from './byte-level-table.js';
import { checkTokenizerConfig, checkTokenizerJson } from './validate.js';

/** Options of `engine.tokenize()`. */
export interface TokenizeOptions {
  /**
   * Whether to add the tokenizer's own special tokens around the text, as its post-processor defines them: the BOS
   * token of Llama and Mistral, nothing for Qwen. Default `true`. This is transformers' `add_special_tokens`
   * (`tokenizer(text, add_special_tokens=...)`) and the HF `tokenizers` library's `encode(text, add_special_tokens)`.
   *
   * Independently of it, special-token strings that appear in the text (such as `"<|im_start|>"` for Qwen) are always
   * matched as their special token, never split into ordinary tokens: transformers' default,
   * `split_special_tokens=False`. Chat templates rely on this.
   */
  special?: boolean;
}

/** Options of `engine.detokenize()`. */
export interface DetokenizeOptions {
  /**
   * Whether to leave special tokens (BOS, EOS, `<|im_end|>`, ...: the added tokens marked `special`) out of the
   * text. Default `false`: every token is rendered. This is transformers' and `tokenizers`' `skip_special_tokens`.
   */
  skipSpecial?: boolean;
}

/** A special token's text as tokenizer_config.json gives it: a string, or an AddedToken object `{ content }`. */
function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') {
    return (value as { content: string }).content;
  }
  return undefined;
}

interface AddedTokenJson {
  id: number;
  content: string;
  special?: boolean;
}

/**
 * A loaded tokenizer. Encoding and decoding follow `tokenizer.json` exactly as the HF `tokenizers` library does
 * (the tests check every corpus string against it); decoding never applies transformers' optional
 * `clean_up_tokenization_spaces`, which is lossy and would make streamed text differ from the whole.
 * @internal
 */
export class TextTokenizer {
  readonly #tokenizer: Tokenizer;
  /** Ids of the added tokens marked special: what `skipSpecial` leaves out. */
  readonly specialIds: ReadonlySet<number>;
  /** Every added token, special or not, by its text. */
  readonly #added = new Map<string, number>();
  /** Ids are 0 to size - 1: the largest id of the vocabulary or an added token, plus one (the model's embedding may
   * have more rows; those ids decode to nothing). */
  readonly size: number;
  /** tokenizer_config.json, as read ({} when the file is absent). */
  readonly config: Readonly<Record<string, unknown>>;
  /** The Jinja chat template (chat_template.jinja, else tokenizer_config.json's chat_template), if any. */
  readonly chatTemplate: string | undefined;
  /**
   * The per-id table of streamed decoding: undefined until first asked for, null when this tokenizer has none.
   * Null from the start unless the library decodes with nothing but its ByteLevel decoder (no end-of-word suffix,
   * which decode would replace by spaces); other decoders (Metaspace, ByteFallback, Sequence, WordPiece) make a
   * token's text depend on its neighbours.
   */
  #byteLevel: ByteLevelTable | null | undefined;

  constructor(json: Record<string, unknown>, config: Record<string, unknown>, chatTemplate: string | undefined, source: string) {
    const size = checkTokenizerJson(json, source);
    try {
      // The library treats a missing clean_up_tokenization_spaces as true; decode() turns it off per call anyway.
      this.#tokenizer = new Tokenizer(json, config);
    } catch (err) {
      throw new BadCheckpointError(
        `${source} could not be used as a tokenizer (${(err as Error).message}). vtengine reads Hugging Face ` +
          'tokenizer.json files (BPE, WordPiece, Unigram); check that the file is complete.',
        { cause: err },
      );
    }
    this.config = config;
    this.chatTemplate = chatTemplate;
    const special = new Set<number>();
    for (const t of (json.added_tokens ?? []) as AddedTokenJson[]) {
      this.#added.set(t.content, t.id);
      if (t.special) special.add(t.id);
    }
    this.specialIds = special;
    this.size = size;
    const decoder = json.decoder as { type?: unknown } | null | undefined;
    const plainByteLevel = decoder?.type === 'ByteLevel' && !this.#tokenizer.decoder?.end_of_word_suffix;
    this.#byteLevel = plainByteLevel ? undefined : null;
  }

  /**
   * What each id adds to streamed text, for a byte-level tokenizer (see byte-level-table.ts); undefined for any
   * other, which streams by re-decoding windows. Built on the first call (50-150 ms for Qwen3's 151,669 ids on a
   * 2-core VM; about 5 MB; loadTokenizer makes that call) and kept for every later stream.
   */
  byteLevelTable(): ByteLevelTable | undefined {
    if (this.#byteLevel === undefined) {
      const lib = this.#tokenizer;
      this.#byteLevel =
        buildByteLevelTable({
          size: this.size,
          tokenOf: (id) => lib.id_to_token(id),
          unkToken: lib.model?.unk_token,
          addedContents: new Set(this.#added.keys()), // what the library's decoder gets: every added token
          specialIds: this.specialIds,
        }) ?? null;
    }
    return this.#byteLevel ?? undefined;
  }

  /** Token ids of `text`; see {@link TokenizeOptions}. */
  encode(text: string, addSpecial: boolean): number[] {
    return this.#tokenizer.encode(text, { add_special_tokens: addSpecial }).ids;
  }

  /** Text of `ids`; see {@link DetokenizeOptions}. Ids the tokenizer does not know decode to nothing, as in `tokenizers`. */
  decode(ids: readonly number[], skipSpecial: boolean): string {
    const known = ids.filter((id) => id < this.size && (!skipSpecial || !this.specialIds.has(id)));
    if (known.length === 0) return ''; // the library refuses an empty list
    return this.#tokenizer.decode(known, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** The id of a token given by its text (an added token or a vocabulary entry), if it has one. */
  tokenId(text: string): number | undefined {
    return this.#added.get(text) ?? this.#tokenizer.token_to_id(text);
  }

  /** A special token named in tokenizer_config.json (`'bos_token'`, `'eos_token'`, ...), as text. */
  specialToken(key: string): string | undefined {
    return tokenText(this.config[key]);
  }
}

/**
 * Reads the tokenizer of a checkpoint folder: `tokenizer.json` (required: without it the result is undefined),
 * `tokenizer_config.json` and `chat_template.jinja` (optional).
 * @throws BadCheckpointError when a file is present but unusable.
 * @internal
 */
export async function loadTokenizer(dir: string): Promise<TextTokenizer | undefined> {
  const jsonFile = path.join(dir, 'tokenizer.json');
  const configFile = path.join(dir, 'tokenizer_config.json');
  const [jsonText, configText, templateText] = await Promise.all([
    readCheckpointText(jsonFile),
    readCheckpointText(configFile),
    readCheckpointText(path.join(dir, 'chat_template.jinja')),
  ]);
  if (jsonText === undefined) return undefined;
  const json = parseCheckpointJson(jsonText, jsonFile);
  const config = configText === undefined ? {} : parseCheckpointJson(configText, configFile);
  checkTokenizerConfig(config, configFile);
  const template = templateText ?? chatTemplateOf(config);
  const tokenizer = new TextTokenizer(json, config, template, jsonFile);
  tokenizer.byteLevelTable(); // built while loading, so that no request's first token waits for it
  return tokenizer;
}

/**
 * tokenizer_config.json's chat_template (its type already checked): a string, or a list of named templates (the
 * one named "default", else the first).
 */
function chatTemplateOf(config: Record<string, unknown>): string | undefined {
  const t = config.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t as Array<{ name: string; template: string }>;
    return (named.find((x) => x.name === 'default') ?? named[0])?.template;
  }
  return undefined;
}

/**
 * Reading the small JSON and text files of a checkpoint folder (tokenizer.json, tokenizer_config.json,
 * chat_template.jinja, generation_config.json) strictly: bytes that are not UTF-8, text that is not JSON and JSON
 * that is not an object are a {@link BadCheckpointError}, never a value decoded with replacement characters or a
 * default, because the Hugging Face libraries refuse such files too.
 * @internal
 * @module
 */
import { readFile } from 'node:fs/promises';
import { BadCheckpointError } from './errors.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A checkpoint file's text, or undefined when it does not exist.
 * @throws BadCheckpointError when it exists but cannot be read or is not UTF-8.
 */
export async function readCheckpointText(file: string): Promise<string | undefined> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new BadCheckpointError(`Could not read ${file}: ${(err as Error).message}.`, { cause: err });
  }
  try {
    return utf8.decode(bytes);
  } catch (err) {
    throw new BadCheckpointError(`${file} is not UTF-8 text. Download it again.`, { cause: err });
  }
}

/**
 * The JSON object in `text`.
 * @throws BadCheckpointError for text that is not JSON, or JSON that is not an object.
 */
export function parseCheckpointJson(text: string, file: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BadCheckpointError(`${file} is not valid JSON (${(err as Error).message}). Download it again.`, { cause: err });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new BadCheckpointError(`${file} must hold a JSON object. Download it again.`);
  }
  return value as Record<string, unknown>;
}

/** Whether `v` is a token id: an integer in [0, 2^31), the range the engine's int32 ids hold. */
export function isTokenId(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 0 && (v as number) < 2 ** 31;
}

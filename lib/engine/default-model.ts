/**
 * The model that ships in the package (models/default: a tiny Qwen3 trained on Python's standard library, see its
 * README), used when {@link Engine.load} gets no folder.
 * @module
 */
import { fileURLToPath } from 'node:url';

/** Where the packaged default model lives: the same relative path from lib/engine/ and dist/engine/. */
export const DEFAULT_MODEL_DIR: string = fileURLToPath(new URL('../../models/default', import.meta.url));

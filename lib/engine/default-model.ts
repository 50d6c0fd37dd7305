/**
 * The model that ships in the package (models/default: a tiny Qwen3 trained on Python's standard library, see its
 * README), used when {@link Engine.load} gets no folder.
 * @module
 */
import { join } from 'node:path';
import { packageRoot, unpackedPath } from '../package-root.js';

/**
 * Where the packaged default model lives: models/default in the package's folder, or its unpacked twin in an
 * Electron app (the engine maps the weights with mmap, which needs real files; see the README's Electron section).
 */
export const DEFAULT_MODEL_DIR: string = unpackedPath(join(packageRoot(), 'models/default'));

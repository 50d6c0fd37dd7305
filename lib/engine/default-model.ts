/**
 * The model that ships in the package (models/default: a tiny Qwen3 trained on Python's standard library, see its
 * README), used when {@link Engine.load} gets no folder.
 * @module
 */
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

/** Where the packaged default model lives: models/default in the package's folder. */
export const DEFAULT_MODEL_DIR: string = join(packageRoot(), 'models/default');

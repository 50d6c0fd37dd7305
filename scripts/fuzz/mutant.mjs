// One mutant checkpoint folder: a copy of a base made of hard links (the base's bytes are never written), and the
// working state of the files that mutations change. A changed file is written as a new file after its link is
// removed, so a base file can never be modified through its link.
import { copyFileSync, linkSync, mkdirSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readSafetensors, encodeSafetensors, headerText } from './safetensors.mjs';
import { stringify } from './raw-json.mjs';

/** Hard-links (or, across file systems, copies) every regular file of `src` into `dst`, following symlinks. */
export function linkTree(src, dst) {
  mkdirSync(dst, { recursive: true });
  for (const name of readdirSync(src)) {
    const from = realpathSync(join(src, name));
    if (!statSync(from).isFile()) continue;
    try {
      linkSync(from, join(dst, name));
    } catch {
      copyFileSync(from, join(dst, name));
    }
  }
}

/**
 * The files of a mutant while mutations are applied. Each file's state is one of
 *   { kind: 'json', value }                     a parsed JSON document, written back with stringify
 *   { kind: 'st', entries, data, lengthField }  a safetensors file: header entries, data bytes, optional length lie
 *   { kind: 'bytes', bytes }                    anything already reduced to raw bytes
 *   { kind: 'absent' }                          deleted
 * Mutations that need a structured state get undefined for a file already turned into bytes, and then do not apply.
 */
export class Mutant {
  /** @param {import('./bases.mjs').Base} base @param {string} dir */
  constructor(base, dir) {
    this.base = base;
    this.dir = dir;
    this.states = new Map();
    /** Steps that run after the files are written (e.g. a folder where a file belongs). */
    this.after = [];
  }

  /** The parsed JSON of a base file, or undefined when the file is absent or no longer JSON. */
  json(file) {
    const s = this.#state(file, () => ({ kind: 'json', value: JSON.parse(readFileSync(join(this.base.dir, file), 'utf8')) }));
    return s.kind === 'json' ? s.value : undefined;
  }

  /** Replaces a JSON file's value (undefined keeps the in-place edits of json()'s object). */
  setJson(file, value) {
    this.states.set(file, { kind: 'json', value });
  }

  /** The safetensors state of a shard, or undefined once it is raw bytes. */
  st(file) {
    const s = this.#state(file, () => ({ kind: 'st', ...readSafetensors(join(this.base.dir, file)), lengthField: undefined }));
    return s.kind === 'st' ? s : undefined;
  }

  /** The current bytes of a file (its serialisation when it is still structured); undefined when deleted. */
  bytes(file) {
    const s = this.#state(file, () => ({ kind: 'bytes', bytes: readFileSync(join(this.base.dir, file)) }));
    return s.kind === 'absent' ? undefined : serialise(s);
  }

  setBytes(file, bytes) {
    this.states.set(file, { kind: 'bytes', bytes: Buffer.from(bytes) });
  }

  remove(file) {
    this.states.set(file, { kind: 'absent' });
  }

  /** Writes the mutated files over the links. */
  flush() {
    for (const [file, s] of this.states) {
      const path = join(this.dir, file);
      rmSync(path, { recursive: true, force: true });
      if (s.kind !== 'absent') writeFileSync(path, serialise(s));
    }
    for (const step of this.after) step();
  }

  #state(file, load) {
    let s = this.states.get(file);
    if (!s) {
      s = this.base.files.includes(file) ? load() : { kind: 'absent' };
      this.states.set(file, s);
    }
    return s;
  }
}

function serialise(s) {
  if (s.kind === 'json') return Buffer.from(stringify(s.value, 2));
  if (s.kind === 'st') return encodeSafetensors(Buffer.from(headerText(s.entries)), s.data, s.lengthField);
  return s.bytes;
}

// The shape every JSON-file mutation shares: it applies to bases that have the file, parses it, and hands the
// object to the mutation (a file that is no longer an object, after an earlier mutation, is left alone).
import { isObject } from './values.mjs';

/** A mutation factory for FILE: edit(kind, (obj, rng, mutant) => what it did, or null when it does not apply). */
export const jsonEdit = (file) => (kind, fn) => ({
  kind,
  applies: (base) => base.files.includes(file),
  apply(m, rng) {
    const j = m.json(file);
    if (!isObject(j)) return null;
    return fn(j, rng, m);
  },
});

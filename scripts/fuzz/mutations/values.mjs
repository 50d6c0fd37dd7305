// Replacement values shared by the mutation catalogues: other JSON types, and numbers at and past the edges that
// parsers get wrong (negative, zero, fractional, past int32/int64/double, precision loss).
import { raw } from '../raw-json.mjs';

/** Values of each JSON type, to put where another type belongs. */
export const OTHER_TYPES = ['64', '', 'silu', true, false, null, [], [1], {}, { a: 1 }, 0.5, -1];

/** A value of a different JSON type than `v`. */
export function otherType(rng, v) {
  const type = (x) => (x === null ? 'null' : Array.isArray(x) ? 'array' : typeof x);
  const choices = OTHER_TYPES.filter((x) => type(x) !== type(v));
  return rng.pick(choices);
}

/** Edge numbers derived from an existing value `v`. */
export function edgeNumber(rng, v) {
  return rng.pick([
    0, -1, -v, v + 1, v - 1, v * 2, v + 0.5, v / 3, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, 1e300, -1e300, 1e-300,
    raw('9007199254740993'), // 2^53 + 1: not a double
    raw('9223372036854775807'), // int64 max
    raw('9223372036854775808'), // int64 max + 1
    raw('18446744073709551616'), // 2^64
    raw('-9223372036854775809'),
    raw('1e400'), // past double
    raw('-0.0'),
    raw(`${Math.trunc(v)}.0`), // an integer written as a float
  ]);
}

/** A random key of a plain object, or undefined when it has none. */
export function randomKey(rng, obj, filter = () => true) {
  const keys = Object.keys(obj).filter((k) => filter(k, obj[k]));
  return keys.length ? rng.pick(keys) : undefined;
}

export const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

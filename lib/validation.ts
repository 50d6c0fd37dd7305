/**
 * Small checks shared by the option validators. Each failure is an InvalidOptionError whose message names the
 * option, shows the value and states what is allowed, so a typo or a wrong unit is found from the message alone.
 * @internal
 * @module
 */
import { InvalidOptionError } from './errors.js';

/** The largest value of a native int32 field. @internal */
export const INT32_MAX = 2 ** 31 - 1;

/** A value as it should appear in an error message. @internal */
export function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return value.length > 8 ? `an array of ${value.length} items` : `[${value.map(show).join(', ')}]`;
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value); // numbers (NaN, Infinity, -0 print as such), booleans, null, undefined, symbols
}

/** Throws unless `value` is a plain options object (or undefined); returns it as a record. @internal */
export function optionsRecord(value: unknown, what: string): Record<string, unknown> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError(`${what} must be an object, got ${show(value)}.`);
  }
  return value as Record<string, unknown>;
}

/** Throws on the first key that is not in `known`, so a misspelt option is not silently ignored. @internal */
export function rejectUnknownKeys(record: Record<string, unknown>, known: readonly string[], what: string): void {
  for (const key of Object.keys(record)) {
    if (!known.includes(key)) {
      throw new InvalidOptionError(`Unknown ${what} option "${key}". Known options: ${known.join(', ')}.`);
    }
  }
}

/** An integer in [min, max], or undefined when absent. @internal */
export function integerOption(name: string, value: unknown, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(`Option "${name}" must be an integer from ${min} to ${max}, got ${show(value)}.`);
  }
  return value;
}

/**
 * A finite number inside a range, or undefined when absent. `range` is how the message states the range, and
 * `inRange` decides it (ranges here are open or closed at either end).
 * @internal
 */
export function numberOption(name: string, value: unknown, range: string, inRange: (n: number) => boolean): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || !inRange(value)) {
    throw new InvalidOptionError(`Option "${name}" must be a number ${range}, got ${show(value)}.`);
  }
  return value;
}

/** One of `allowed`, or undefined when absent. @internal */
export function oneOfOption<T extends string>(name: string, value: unknown, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw new InvalidOptionError(`Option "${name}" must be one of ${allowed.map(show).join(', ')}, got ${show(value)}.`);
  }
  return value as T;
}

/** A boolean, or undefined when absent. @internal */
export function booleanOption(name: string, value: unknown): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new InvalidOptionError(`Option "${name}" must be a boolean, got ${show(value)}.`);
  return value;
}

/** A function, or undefined when absent. @internal */
export function functionOption<T extends (...args: never[]) => unknown>(name: string, value: unknown): T | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'function') throw new InvalidOptionError(`Option "${name}" must be a function, got ${show(value)}.`);
  return value as T;
}

/** An AbortSignal (checked by shape, so signals from other realms or polyfills work), or undefined. @internal */
export function signalOption(name: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  const s = value as Partial<AbortSignal> | null;
  if (s === null || typeof s !== 'object' || typeof s.aborted !== 'boolean' || typeof s.addEventListener !== 'function') {
    throw new InvalidOptionError(`Option "${name}" must be an AbortSignal (from an AbortController), got ${show(value)}.`);
  }
  return value as AbortSignal;
}

/**
 * An array of token ids: non-negative integers below `vocabSize` when the vocabulary is known (else below 2^31).
 * @internal
 */
export function tokenIdsOption(name: string, value: unknown, vocabSize?: number): number[] {
  if (!Array.isArray(value)) throw new InvalidOptionError(`Option "${name}" must be an array of token ids, got ${show(value)}.`);
  const limit = vocabSize ?? INT32_MAX + 1;
  for (let i = 0; i < value.length; i++) {
    const id: unknown = value[i];
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= limit) {
      const allowed = vocabSize === undefined ? 'a non-negative integer' : `an integer from 0 to ${vocabSize - 1} (the model's vocabulary)`;
      throw new InvalidOptionError(`Option "${name}" must hold token ids; ${name}[${i}] is ${show(id)}, expected ${allowed}.`);
    }
  }
  return value as number[];
}

/**
 * The fields of a JSON request body, read one by one, so that a field nobody read (a typo, a parameter this server
 * does not implement) is refused instead of silently ignored.
 * @internal
 * @module
 */
import { badParam } from './api-error.js';

/** A request body being read. @internal */
export class RequestFields {
  readonly #body: Readonly<Record<string, unknown>>;
  readonly #read = new Set<string>();

  constructor(body: Readonly<Record<string, unknown>>) {
    this.#body = body;
  }

  /** The value of `key`; `null` reads as absent, as the OpenAI API treats it. */
  get(key: string): unknown {
    this.#read.add(key);
    const value = this.#body[key];
    return value === null ? undefined : value;
  }

  /** Accepts `keys` without acting on them: they change nothing this server does. */
  ignore(...keys: string[]): void {
    for (const key of keys) this.#read.add(key);
  }

  /**
   * Accepts `key` only at a value that asks for nothing this server lacks (absent, null, or `isDefault`).
   * @throws ApiError 400 naming the parameter and why it is not supported.
   */
  onlyDefault(key: string, isDefault: (value: unknown) => boolean, why: string): void {
    const value = this.get(key);
    if (value !== undefined && !isDefault(value)) throw badParam(key, `"${key}" is not supported: ${why}`, 'unsupported_parameter');
  }

  /** @throws ApiError 400 for the first field that was never read, with the OpenAI API's message for it. */
  rejectUnread(): void {
    for (const key of Object.keys(this.#body)) {
      if (!this.#read.has(key)) throw badParam(key, `Unrecognized request argument supplied: ${key}`, 'unknown_parameter');
    }
  }
}

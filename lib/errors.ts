/**
 * Every failure that reaches a caller is an {@link EngineError} subclass with a stable string `code`, a message that
 * says what to do, and the underlying failure (a native error, an abort reason) in `cause`.
 * @module
 */

/**
 * The base class of every error vtengine throws or rejects with.
 *
 * Match on `code` (stable across releases) or on the subclass with `instanceof`; the message is for people and may
 * change.
 *
 * @example
 * ```ts
 * try {
 *   await Engine.load('./models/missing');
 * } catch (err) {
 *   if (err instanceof EngineError && err.code === 'ERR_MODEL_NOT_FOUND') console.error(err.message);
 *   else throw err;
 * }
 * ```
 */
export class EngineError extends Error {
  /** A stable identifier of the failure, such as `'ERR_MODEL_NOT_FOUND'`. */
  readonly code: string;

  /**
   * @param code - the stable identifier of the failure.
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The checkpoint folder passed to `Engine.load` does not exist. Code `ERR_MODEL_NOT_FOUND`. */
export class ModelNotFoundError extends EngineError {
  declare readonly code: 'ERR_MODEL_NOT_FOUND';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_MODEL_NOT_FOUND', message, options);
  }
}

/** A file the checkpoint needs (`config.json`, a safetensors shard) is absent. Code `ERR_MISSING_FILE`. */
export class MissingFileError extends EngineError {
  declare readonly code: 'ERR_MISSING_FILE';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_MISSING_FILE', message, options);
  }
}

/**
 * The checkpoint is malformed or contradicts itself: bad `config.json`, a safetensors header the safetensors library
 * would refuse, an inconsistent index, a tensor the model does not use. Code `ERR_BAD_CHECKPOINT`.
 */
export class BadCheckpointError extends EngineError {
  declare readonly code: 'ERR_BAD_CHECKPOINT';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_BAD_CHECKPOINT', message, options);
  }
}

/** A tensor's bytes run past the end of its file (an interrupted download, usually). Code `ERR_TRUNCATED_CHECKPOINT`. */
export class TruncatedCheckpointError extends EngineError {
  declare readonly code: 'ERR_TRUNCATED_CHECKPOINT';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_TRUNCATED_CHECKPOINT', message, options);
  }
}

/**
 * `config.json` names a model architecture, or a variant of one (an activation, a RoPE type, sliding-window
 * attention, softcapping, ...), this release does not implement; the message names the field. Code
 * `ERR_UNSUPPORTED_ARCH`.
 */
export class UnsupportedArchitectureError extends EngineError {
  declare readonly code: 'ERR_UNSUPPORTED_ARCH';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_UNSUPPORTED_ARCH', message, options);
  }
}

/** A tensor uses a dtype this release cannot compute with, or the checkpoint is quantized. Code `ERR_UNSUPPORTED_DTYPE`. */
export class UnsupportedDtypeError extends EngineError {
  declare readonly code: 'ERR_UNSUPPORTED_DTYPE';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_UNSUPPORTED_DTYPE', message, options);
  }
}

/** A tensor's shape differs from what `config.json` implies. Code `ERR_SHAPE_MISMATCH`. */
export class ShapeMismatchError extends EngineError {
  declare readonly code: 'ERR_SHAPE_MISMATCH';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_SHAPE_MISMATCH', message, options);
  }
}

/**
 * An argument or option is invalid (wrong type, out of range, unknown name), or the API was used in a way it does
 * not allow. The message names the option, the value and what is allowed. Code `ERR_INVALID_OPTION`.
 */
export class InvalidOptionError extends EngineError {
  declare readonly code: 'ERR_INVALID_OPTION';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_INVALID_OPTION', message, options);
  }
}

/** The prompt leaves no room for a new token in the engine's context (`maxContext`). Code `ERR_CONTEXT_OVERFLOW`. */
export class ContextOverflowError extends EngineError {
  declare readonly code: 'ERR_CONTEXT_OVERFLOW';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_CONTEXT_OVERFLOW', message, options);
  }
}

/** An allocation failed or would not fit (host or GPU memory, KV pool). Code `ERR_OUT_OF_MEMORY`. */
export class OutOfMemoryError extends EngineError {
  declare readonly code: 'ERR_OUT_OF_MEMORY';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_OUT_OF_MEMORY', message, options);
  }
}

/** `device: 'cuda'` was asked for and no usable NVIDIA GPU or driver was found. Code `ERR_NO_GPU`. */
export class NoGpuError extends EngineError {
  declare readonly code: 'ERR_NO_GPU';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_NO_GPU', message, options);
  }
}

/**
 * The caller cancelled a load (through its `signal`). Code `ERR_ABORTED`.
 *
 * A cancelled generation does not reject with this error: it resolves with its partial result and
 * `finishReason: 'abort'`.
 */
export class AbortError extends EngineError {
  declare readonly code: 'ERR_ABORTED';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_ABORTED', message, options);
  }
}

/** The engine was used after `dispose()`. Code `ERR_DISPOSED`. */
export class DisposedError extends EngineError {
  declare readonly code: 'ERR_DISPOSED';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_DISPOSED', message, options);
  }
}

/**
 * A text method (`tokenize`, `detokenize`, `applyChatTemplate`, a `{ prompt }` or `{ messages }` input, `stop`
 * strings) was used on an engine whose checkpoint has no tokenizer (`tokenizer.json`). Code `ERR_NO_TOKENIZER`.
 */
export class NoTokenizerError extends EngineError {
  declare readonly code: 'ERR_NO_TOKENIZER';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_NO_TOKENIZER', message, options);
  }
}

/**
 * Messages were given to a checkpoint whose tokenizer has no chat template (`chat_template` in
 * `tokenizer_config.json`, or `chat_template.jinja`). Code `ERR_NO_CHAT_TEMPLATE`.
 */
export class NoChatTemplateError extends EngineError {
  declare readonly code: 'ERR_NO_CHAT_TEMPLATE';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_NO_CHAT_TEMPLATE', message, options);
  }
}

/** A bug in vtengine: please report it with the message and, if you can, the model. Code `ERR_INTERNAL`. */
export class InternalError extends EngineError {
  declare readonly code: 'ERR_INTERNAL';
  /**
   * @param message - what went wrong and what to do about it.
   * @param options - `cause`: the error or value that led to this one.
   */
  constructor(message: string, options?: ErrorOptions) {
    super('ERR_INTERNAL', message, options);
  }
}

type EngineErrorClass = new (message: string, options?: ErrorOptions) => EngineError;

/** Native status names (vt_status_name) to the class that carries them in JS. */
const byNativeStatus: Readonly<Record<string, EngineErrorClass>> = {
  ERR_MODEL_NOT_FOUND: ModelNotFoundError,
  ERR_MISSING_FILE: MissingFileError,
  ERR_BAD_CHECKPOINT: BadCheckpointError,
  ERR_TRUNCATED_CHECKPOINT: TruncatedCheckpointError,
  ERR_UNSUPPORTED_ARCH: UnsupportedArchitectureError,
  ERR_UNSUPPORTED_DTYPE: UnsupportedDtypeError,
  ERR_SHAPE_MISMATCH: ShapeMismatchError,
  ERR_INVALID_OPTION: InvalidOptionError,
  ERR_CONTEXT_OVERFLOW: ContextOverflowError,
  ERR_OUT_OF_MEMORY: OutOfMemoryError,
  ERR_NO_GPU: NoGpuError,
  ERR_CANCELLED: AbortError, // native's name for a load stopped through its cancel flag
  ERR_ABORTED: AbortError,
  ERR_DISPOSED: DisposedError,
  ERR_INTERNAL: InternalError,
};

/**
 * Turns what the native addon threw (a plain Error whose `code` is a status name) into the matching
 * {@link EngineError} subclass, keeping the native message (native messages already say what to do) and the
 * original in `cause`. EngineErrors pass through unchanged; anything unrecognised becomes an {@link InternalError}.
 * @internal
 */
export function fromNativeError(err: unknown): EngineError {
  if (err instanceof EngineError) return err;
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const Class = typeof code === 'string' && Object.hasOwn(byNativeStatus, code) ? byNativeStatus[code] : undefined;
    if (Class) return new Class(err.message, { cause: err });
    return new InternalError(`The native engine failed unexpectedly: ${err.message}. Please report this.`, { cause: err });
  }
  return new InternalError(`The native engine failed unexpectedly: ${String(err)}. Please report this.`, { cause: err });
}

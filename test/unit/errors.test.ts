import { describe, expect, it } from 'vitest';
import {
  AbortError,
  BadCheckpointError,
  ContextOverflowError,
  DisposedError,
  EngineError,
  InternalError,
  InvalidOptionError,
  MissingFileError,
  ModelNotFoundError,
  NoGpuError,
  OutOfMemoryError,
  ShapeMismatchError,
  TruncatedCheckpointError,
  UnsupportedArchitectureError,
  UnsupportedDtypeError,
  fromNativeError,
} from '../../lib/errors.js';
import * as api from '../../lib/index.js';

function nativeError(code: string, message = `native says ${code}`): Error {
  return Object.assign(new Error(message), { code });
}

// [native status name, class, public code]
const cases = [
  ['ERR_MODEL_NOT_FOUND', ModelNotFoundError, 'ERR_MODEL_NOT_FOUND'],
  ['ERR_MISSING_FILE', MissingFileError, 'ERR_MISSING_FILE'],
  ['ERR_BAD_CHECKPOINT', BadCheckpointError, 'ERR_BAD_CHECKPOINT'],
  ['ERR_TRUNCATED_CHECKPOINT', TruncatedCheckpointError, 'ERR_TRUNCATED_CHECKPOINT'],
  ['ERR_UNSUPPORTED_ARCH', UnsupportedArchitectureError, 'ERR_UNSUPPORTED_ARCH'],
  ['ERR_UNSUPPORTED_DTYPE', UnsupportedDtypeError, 'ERR_UNSUPPORTED_DTYPE'],
  ['ERR_SHAPE_MISMATCH', ShapeMismatchError, 'ERR_SHAPE_MISMATCH'],
  ['ERR_INVALID_OPTION', InvalidOptionError, 'ERR_INVALID_OPTION'],
  ['ERR_CONTEXT_OVERFLOW', ContextOverflowError, 'ERR_CONTEXT_OVERFLOW'],
  ['ERR_OUT_OF_MEMORY', OutOfMemoryError, 'ERR_OUT_OF_MEMORY'],
  ['ERR_NO_GPU', NoGpuError, 'ERR_NO_GPU'],
  ['ERR_CANCELLED', AbortError, 'ERR_ABORTED'],
  ['ERR_INTERNAL', InternalError, 'ERR_INTERNAL'],
] as const;

describe('error classes', () => {
  it.each(cases)('%s: %o has a stable code, a name and a cause', (_status, Class, code) => {
    const cause = new Error('root');
    const err = new Class('do this', { cause });
    expect(err).toBeInstanceOf(EngineError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe(code);
    expect(err.name).toBe(Class.name);
    expect(err.message).toBe('do this');
    expect(err.cause).toBe(cause);
  });

  it('AbortError and DisposedError carry ERR_ABORTED and ERR_DISPOSED', () => {
    expect(new AbortError('x').code).toBe('ERR_ABORTED');
    expect(new DisposedError('x').code).toBe('ERR_DISPOSED');
  });

  it('every class is exported from the package entry, and the converter is not', () => {
    for (const [, Class] of cases) expect((api as Record<string, unknown>)[Class.name]).toBe(Class);
    expect(api.EngineError).toBe(EngineError);
    expect(api.DisposedError).toBe(DisposedError);
    expect('fromNativeError' in api).toBe(false);
  });
});

describe('fromNativeError', () => {
  it.each(cases)('maps native %s to %o, keeping the message and the cause', (status, Class, code) => {
    const native = nativeError(status, 'config.json is not valid JSON: fix or re-download it');
    const err = fromNativeError(native);
    expect(err).toBeInstanceOf(Class);
    expect(err.code).toBe(code);
    expect(err.message).toBe('config.json is not valid JSON: fix or re-download it');
    expect(err.cause).toBe(native);
  });

  it('maps ERR_DISPOSED and ERR_ABORTED too', () => {
    expect(fromNativeError(nativeError('ERR_DISPOSED'))).toBeInstanceOf(DisposedError);
    expect(fromNativeError(nativeError('ERR_ABORTED'))).toBeInstanceOf(AbortError);
  });

  it('passes an EngineError through unchanged', () => {
    const err = new OutOfMemoryError('free memory');
    expect(fromNativeError(err)).toBe(err);
  });

  it('turns an Error with an unknown or missing code into an InternalError that keeps the message', () => {
    for (const native of [nativeError('ERR_SOMETHING_NEW', 'odd'), new Error('odd'), nativeError('toString', 'odd')]) {
      const err = fromNativeError(native);
      expect(err).toBeInstanceOf(InternalError);
      expect(err.message).toContain('odd');
      expect(err.cause).toBe(native);
    }
  });

  it('turns a thrown non-Error into an InternalError', () => {
    const err = fromNativeError('boom');
    expect(err).toBeInstanceOf(InternalError);
    expect(err.message).toContain('boom');
    expect(err.cause).toBe('boom');
  });
});

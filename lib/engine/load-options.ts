/**
 * Options of `Engine.load` and their validation into the native load parameters.
 * @module
 */
import type { NativeLoadParams } from '../native/addon.js';
import {
  INT32_MAX,
  functionOption,
  integerOption,
  oneOfOption,
  optionsRecord,
  rejectUnknownKeys,
  signalOption,
} from '../validation.js';

/** Where the model runs. `'auto'` picks a usable NVIDIA GPU when there is one, else the CPU. */
export type DeviceOption = 'cpu' | 'cuda' | 'auto';

/** Load progress, as reported to {@link LoadOptions.onProgress}. */
export interface LoadProgress {
  /** How far the load is, from 0 to 1. */
  fraction: number;
  /** A short name of what the load is doing, such as `'mapping'`, `'weights'` or `'kv cache'`. */
  stage: string;
}

/** Options of `Engine.load`. Every field is optional; an unknown field is an error, so a typo is caught. */
export interface LoadOptions {
  /** Where to run the model. Default `'auto'`: a usable NVIDIA GPU if present, else the CPU. */
  device?: DeviceOption;
  /** Tokens per sequence (prompt + generated). Default: the model's maximum position count, capped at 8192. */
  maxContext?: number;
  /** CPU backend threads, 1 to 1024. Default: the number of online cores. */
  threads?: number;
  /** Tokens the engine processes in one step (decodes plus prefill chunks). Default 512. */
  maxBatchTokens?: number;
  /** Sequences scheduled in one step. Default 64. */
  maxSeqs?: number;
  /** Tokens per paged-KV block. Default 16. */
  kvBlockSize?: number;
  /** Size of the KV-cache pool in bytes. Default: room for max(maxContext, 4096) tokens. */
  kvCacheBytes?: number;
  /**
   * Activation precision on the GPU: `'float32'` (exact against fp32 references; for debugging and tests) or
   * `'bfloat16'` (faster; rounds more). Default `'auto'`, which is `'float32'` in this release. The CPU backend
   * always computes in float32.
   */
  dtype?: 'auto' | 'float32' | 'bfloat16';
  /**
   * Called on the JS thread as the load advances. Never called after the load has settled. If it throws, the
   * load is cancelled and rejects with what it threw.
   */
  onProgress?: (progress: LoadProgress) => void;
  /** Cancels the load when aborted: `Engine.load` then rejects with an `AbortError`. */
  signal?: AbortSignal;
}

const KNOWN_KEYS: readonly (keyof LoadOptions)[] = [
  'device',
  'maxContext',
  'threads',
  'maxBatchTokens',
  'maxSeqs',
  'kvBlockSize',
  'kvCacheBytes',
  'dtype',
  'onProgress',
  'signal',
];

/**
 * Checks `options` and maps them to the native load parameters (0 = the engine's default). `onProgress` and
 * `signal` are checked here but do not travel in the result: `Engine.load` wires them itself.
 * @throws InvalidOptionError naming the option, the value and the allowed range.
 * @internal
 */
export function validateLoadOptions(options: unknown): NativeLoadParams {
  const o = optionsRecord(options, 'Engine.load options');
  rejectUnknownKeys(o, KNOWN_KEYS, 'Engine.load');
  functionOption('onProgress', o.onProgress);
  signalOption('signal', o.signal);
  return {
    device: oneOfOption('device', o.device, ['auto', 'cpu', 'cuda'] as const) ?? 'auto',
    threads: integerOption('threads', o.threads, 1, 1024) ?? 0,
    maxContext: integerOption('maxContext', o.maxContext, 1, INT32_MAX) ?? 0,
    maxSeqs: integerOption('maxSeqs', o.maxSeqs, 1, INT32_MAX) ?? 0,
    maxBatchTokens: integerOption('maxBatchTokens', o.maxBatchTokens, 1, INT32_MAX) ?? 0,
    kvBlockSize: integerOption('kvBlockSize', o.kvBlockSize, 1, INT32_MAX) ?? 0,
    kvCacheBytes: integerOption('kvCacheBytes', o.kvCacheBytes, 1, Number.MAX_SAFE_INTEGER) ?? 0,
    dtype: oneOfOption('dtype', o.dtype, ['auto', 'float32', 'bfloat16'] as const) ?? 'auto',
  };
}

/**
 * Options of `Engine.load` and their validation into the native load parameters.
 * @module
 */
import { InvalidOptionError } from '../errors.js';
import type { NativeCudaGraphs, NativeLoadParams } from '../native/addon.js';
import {
  INT32_MAX,
  booleanOption,
  functionOption,
  integerOption,
  numberOption,
  oneOfOption,
  optionsRecord,
  rejectUnknownKeys,
  show,
  signalOption,
} from '../validation.js';

/** Where the model runs. `'auto'` picks a usable NVIDIA GPU when there is one, else the CPU. */
export type DeviceOption = 'cpu' | 'cuda' | 'auto';

/** Load progress, as reported to {@link LoadOptions.onProgress}. */
export interface LoadProgress {
  /** How far the load is, from 0 to 1. */
  fraction: number;
  /** A short name of what the load is doing, such as `'mapping'`, `'weights'`, `'kv cache'` (CPU) or `'cuda graphs'`. */
  stage: string;
}

/**
 * How decode steps use CUDA graphs, as {@link LoadOptions.cudaGraphs} takes it. Only the CUDA backend reads it; the
 * CPU backend accepts it and ignores it.
 *
 * A decode step (every sequence in it decodes one token) whose batch fits a bucket replays the graph captured for
 * the smallest bucket that holds it, with the batch padded to that size, instead of launching each kernel. That
 * saves the per-kernel launch cost, which weighs most on small-batch decode, for some GPU memory per captured bucket.
 * The smallest buckets (1 and 2 sequences on Qwen3's shapes, bf16 activations, sm_90 and newer) hold a second graph,
 * for steps whose sequences are all within 768 tokens, where the decode attention takes a faster form.
 */
export interface CudaGraphsOptions {
  /** Whether decode steps replay CUDA graphs. Default `true`. */
  enabled?: boolean;
  /**
   * The largest decode batch captured, an integer from 1 to 4096; a larger batch runs without a graph. Values above
   * `maxSeqs` act as `maxSeqs`, since no step holds more sequences. When `buckets` is given too, `maxBatch` must be
   * at least its largest bucket, and the buckets alone say what is captured. Default: `maxSeqs`, capped at 256.
   */
  maxBatch?: number;
  /**
   * The batch sizes to capture: strictly ascending integers from 1 to `maxSeqs` (256, its default on the GPU, when
   * `maxSeqs` is not given), at most 32 of them. Default: the powers of two up to `maxBatch`, plus `maxBatch` itself
   * when it is not one (with every default: 1, 2, 4, 8, 16, 32, 64, 128, 256).
   */
  buckets?: number[];
  /**
   * Lets buckets whose graphs differ only in launch sizes share one executable graph, updated in place
   * (`cuGraphExecUpdate`) each time the replayed bucket changes: fewer executables and less GPU memory, for an
   * update on every bucket switch. Default `false`, until it is measured to save memory worth that cost.
   */
  dedup?: boolean;
  /**
   * When each bucket's graph is captured: `'load'` (the default) captures every bucket during `Engine.load`, so the
   * first decode step of every batch size runs at full speed; `'first-use'` captures a bucket during the first decode
   * step that needs it, so the load is shorter (on an H200, the Qwen3-0.6B shape's load to first token took 151-174
   * ms against 206-210 ms) and an engine that only ever decodes a few batch sizes holds only their graphs, while
   * that first step of each batch size pays its capture (tens of milliseconds). Decode speed is the same either way.
   */
  capture?: 'load' | 'first-use';
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
  /**
   * Sequences scheduled in one step (the requests decoding together). Default 256 on the GPU, where a decode step
   * costs little more for more sequences, and 64 on the CPU. It also sizes the per-step workspaces (logits for
   * `maxSeqs` rows) and the default CUDA-graph buckets.
   */
  maxSeqs?: number;
  /** Tokens per paged-KV block. Default 16. */
  kvBlockSize?: number;
  /**
   * Size of the KV-cache pool in bytes, in whole blocks (cut down to them); it must hold `maxContext` tokens, or the
   * load fails with `ERR_OUT_OF_MEMORY`. On the CPU it is the pool (default: room for max(maxContext, 4096) tokens,
   * rounded up to whole blocks); its pages take memory as they are first written. On the GPU it is the pool's
   * ceiling: the load maps device memory for max(maxContext, 4096) tokens (in whole chunks of about 1024 tokens for
   * Qwen3's shapes), the pool grows in chunks as requests need blocks, up to the ceiling, and gives the chunks above
   * its load-time size back once the engine has been idle for a second. Default on the GPU: what the GPU has free at load, less the
   * weights, the workspaces and a 256 MiB reserve (at most `maxSeqs` x `maxContext` tokens), so a server started
   * with no options batches as many requests as the GPU can hold and takes the memory only while they run.
   * `memory().engine.kvCache` reports the ceiling (`bytes`, `blocksTotal`) and what is mapped now (`residentBytes`,
   * `blocksMapped`).
   */
  kvCacheBytes?: number;
  /**
   * The share of the GPU's memory, in (0, 1], this engine may take in all (weights, workspaces, CUDA graphs and
   * the KV cache); the KV pool's ceiling is what the rest leaves (the pool grows to it as requests need blocks, as
   * with `kvCacheBytes`), so a larger share means more tokens in flight. An alternative to `kvCacheBytes` (give one
   * or the other). The load fails with `ERR_OUT_OF_MEMORY` when the share leaves no room for `maxContext` tokens.
   * CUDA backend only; the CPU backend ignores it. Default: unset (the ceiling is what the GPU has free at load; see
   * `kvCacheBytes`).
   */
  gpuMemoryUtilization?: number;
  /**
   * The type of the activations on the GPU (what the kernels compute and hand each other), not of the weights,
   * which keep the checkpoint's format: `'bfloat16'` (the default: tensor cores for prefill and large batches; the
   * residual stream, softmax and logits stay fp32; within transformers' own bf16 error of float64 references)
   * or `'float32'` (exact against fp32 references to rounding, slower prefill; for debugging and tests).
   * Default `'auto'`, which is `'bfloat16'` on the GPU. The CPU backend always computes in float32.
   */
  activationDtype?: 'auto' | 'float32' | 'bfloat16';
  /**
   * CUDA graphs for decode steps (see {@link CudaGraphsOptions}); only the CUDA backend reads it, the CPU backend
   * ignores it. Default: on, with the default buckets. `false` is the same as `{ enabled: false }` and `true` the
   * same as leaving it out.
   */
  cudaGraphs?: boolean | CudaGraphsOptions;
  /**
   * Prefix caching: the KV cache of every full block of tokens (`kvBlockSize`, 16 by default) is kept after its
   * request ends, identified by those tokens and every token before them, and a later request whose tokens start
   * the same way (a shared system prompt, the earlier turns of a chat, the same document asked about again) reuses
   * it and computes only the rest, so its first token comes sooner. Outputs are the same with it on or off. Cached
   * blocks no request holds count as free: a new request's KV takes the least recently used of them when no block is
   * truly free. `stats()` reports the lookups and hits (`prefixCacheQueries`, `prefixCacheHitTokens`, ...). A request
   * asking for prompt logprobs (`Engine.score`) computes its whole prompt. Default: on, except for models with
   * recurrent layers (Qwen3.5 / Qwen3.6), whose per-sequence state cached blocks cannot restore: they run without it,
   * and `true` for them is an `InvalidOptionError`. `false` turns it off.
   */
  prefixCaching?: boolean;
  /**
   * Load the language model alone from a multimodal checkpoint (Qwen3.5 / Qwen3.6 `ForConditionalGeneration`): its
   * vision tower's tensors (`model.visual.*`) are never read, copied or uploaded, and the engine drops their pages,
   * so `memory().engine.weights.skippedResidentBytes` stays 0; `memory()` and `Engine.estimate()` list their bytes
   * as `skippedBytes`. The engine does not run images yet, so today every load is language-model-only and this
   * option changes nothing but documents the intent; once images are supported, `false` (the default then) will
   * load the tower too.
   */
  languageModelOnly?: boolean;
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
  'gpuMemoryUtilization',
  'activationDtype',
  'cudaGraphs',
  'prefixCaching',
  'languageModelOnly',
  'onProgress',
  'signal',
];

const CUDA_GRAPHS_KEYS: readonly (keyof CudaGraphsOptions)[] = ['enabled', 'maxBatch', 'buckets', 'dedup', 'capture'];

/** vt_cuda_graphs' bounds (vt_engine.h): the largest batch captured, and the room for buckets. */
const CUDA_GRAPHS_MAX_BATCH = 4096;
const CUDA_GRAPHS_MAX_BUCKETS = 32;
/**
 * vt_engine_params.max_seqs' documented default on the GPU (vt_engine.h), which bounds the buckets when maxSeqs is
 * absent (the CPU, whose default is 64, ignores them).
 */
const DEFAULT_MAX_SEQS = 256;

/**
 * Checks `options` and maps them to the native load parameters (0 = the engine's default). `onProgress` and
 * `signal` are checked here but do not travel in the result: `Engine.load` wires them itself.
 * @throws InvalidOptionError naming the option, the value and the allowed range.
 * @internal
 */
export function validateLoadOptions(options: unknown): NativeLoadParams {
  const o = optionsRecord(options, 'Engine.load options');
  if ('dtype' in o) {
    // Its old name: said plainly, so that nobody takes it for the weights' type (which the checkpoint decides).
    throw new InvalidOptionError(
      'The load option "dtype" is now "activationDtype": the type of the GPU activations ("auto", "bfloat16" or ' +
        '"float32"). The weights keep the checkpoint\'s format.',
    );
  }
  rejectUnknownKeys(o, KNOWN_KEYS, 'Engine.load');
  functionOption('onProgress', o.onProgress);
  booleanOption('languageModelOnly', o.languageModelOnly); // (validated; every load is language-model-only today)
  signalOption('signal', o.signal);
  const maxSeqs = integerOption('maxSeqs', o.maxSeqs, 1, INT32_MAX);
  return {
    device: oneOfOption('device', o.device, ['auto', 'cpu', 'cuda'] as const) ?? 'auto',
    threads: integerOption('threads', o.threads, 1, 1024) ?? 0,
    maxContext: integerOption('maxContext', o.maxContext, 1, INT32_MAX) ?? 0,
    maxSeqs: maxSeqs ?? 0,
    maxBatchTokens: integerOption('maxBatchTokens', o.maxBatchTokens, 1, INT32_MAX) ?? 0,
    kvBlockSize: integerOption('kvBlockSize', o.kvBlockSize, 1, INT32_MAX) ?? 0,
    kvCacheBytes: integerOption('kvCacheBytes', o.kvCacheBytes, 1, Number.MAX_SAFE_INTEGER) ?? 0,
    gpuMemoryUtilization: gpuMemoryUtilizationOption(o.gpuMemoryUtilization, o.kvCacheBytes),
    dtype: oneOfOption('activationDtype', o.activationDtype, ['auto', 'float32', 'bfloat16'] as const) ?? 'auto',
    cudaGraphs: cudaGraphsOption(o.cudaGraphs, maxSeqs),
    // (absent: the engine's default, on where the model allows it)
    prefixCaching: booleanOption('prefixCaching', o.prefixCaching),
  };
}

/** `gpuMemoryUtilization` → a share in (0, 1], or 0 when absent; never together with `kvCacheBytes`. */
function gpuMemoryUtilizationOption(value: unknown, kvCacheBytes: unknown): number {
  const share = numberOption('gpuMemoryUtilization', value, 'in (0, 1]', (n) => n > 0 && n <= 1);
  if (share !== undefined && kvCacheBytes !== undefined) {
    throw new InvalidOptionError(
      'Give "kvCacheBytes" or "gpuMemoryUtilization", not both: each one sizes the KV cache.',
    );
  }
  return share ?? 0;
}

/** `cudaGraphs` → vt_cuda_graphs' fields (0 / empty = the engine's default); `maxSeqs` as given, if it was. */
function cudaGraphsOption(value: unknown, maxSeqs: number | undefined): NativeCudaGraphs {
  const defaults: NativeCudaGraphs = { enabled: -1, maxBatch: 0, buckets: [], dedup: false, firstUse: false };
  if (value === undefined || value === true) return defaults;
  if (value === false) return { ...defaults, enabled: 0 };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError(
      'Option "cudaGraphs" must be a boolean or an object { enabled?, maxBatch?, buckets?, dedup?, capture? }, ' +
        `got ${show(value)}.`,
    );
  }
  const o = value as Record<string, unknown>;
  rejectUnknownKeys(o, CUDA_GRAPHS_KEYS, 'cudaGraphs');
  const enabled = booleanOption('cudaGraphs.enabled', o.enabled);
  const maxBatch = integerOption('cudaGraphs.maxBatch', o.maxBatch, 1, CUDA_GRAPHS_MAX_BATCH);
  const buckets = bucketsOption(o.buckets, maxSeqs);
  const dedup = booleanOption('cudaGraphs.dedup', o.dedup);
  if (o.capture !== undefined && o.capture !== 'load' && o.capture !== 'first-use') {
    throw new InvalidOptionError(`Option "cudaGraphs.capture" must be 'load' or 'first-use', got ${show(o.capture)}.`);
  }
  const largest = buckets?.[buckets.length - 1];
  if (maxBatch !== undefined && largest !== undefined && maxBatch < largest) {
    throw new InvalidOptionError(
      `Option "cudaGraphs.maxBatch" must be at least the largest of cudaGraphs.buckets (${largest}), got ${maxBatch}; ` +
        'raise it, or leave it out and let the buckets say what is captured.',
    );
  }
  return {
    enabled: enabled === undefined ? -1 : enabled ? 1 : 0,
    maxBatch: maxBatch ?? 0,
    buckets: buckets ?? [],
    dedup: dedup ?? false,
    firstUse: o.capture === 'first-use',
  };
}

/** `cudaGraphs.buckets`: 1 to 32 strictly ascending batch sizes, each from 1 to maxSeqs; a copy of them. */
function bucketsOption(value: unknown, maxSeqs: number | undefined): number[] | undefined {
  const name = 'cudaGraphs.buckets';
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length < 1 || value.length > CUDA_GRAPHS_MAX_BUCKETS) {
    throw new InvalidOptionError(
      `Option "${name}" must be an array of 1 to ${CUDA_GRAPHS_MAX_BUCKETS} batch sizes, got ${show(value)}.`,
    );
  }
  const limit = maxSeqs ?? DEFAULT_MAX_SEQS;
  const bound = maxSeqs === undefined ? `${limit}, the default maxSeqs on the GPU` : `${limit}, maxSeqs`;
  const buckets: number[] = [];
  for (let i = 0; i < value.length; i++) {
    const b: unknown = value[i];
    if (typeof b !== 'number' || !Number.isInteger(b) || b < 1 || b > limit) {
      throw new InvalidOptionError(`Option "${name}" must hold integers from 1 to ${bound}; ${name}[${i}] is ${show(b)}.`);
    }
    if (i > 0 && b <= buckets[i - 1]) {
      throw new InvalidOptionError(
        `Option "${name}" must be strictly ascending; ${name}[${i}] is ${b}, after ${buckets[i - 1]}.`,
      );
    }
    buckets.push(b);
  }
  return buckets;
}

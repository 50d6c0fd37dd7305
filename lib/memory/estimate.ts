/**
 * `Engine.estimate()`: what a load would take, by tier, from the native sizing (the same code `Engine.load` runs),
 * whether it fits, and when it does not, which option to change and to what.
 * @internal
 * @module
 */
import { type EngineError, OutOfMemoryError, fromNativeError } from '../errors.js';
import type { NativeAddon, NativeEstimate, NativeLoadParams } from '../native/addon.js';
import type { MemoryEstimate } from './types.js';

/** vt_engine_params.kv_block_size's documented default (vt_engine.h). */
const DEFAULT_BLOCK_SIZE = 16;
/** Suggestions leave this share of MemAvailable free: it moves, and the process needs some besides the engine. */
const HEADROOM = 0.1;

/** Bytes for a message: 1.2 GiB, 80.1 MiB, 2.5 KiB. */
function size(bytes: number): string {
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  if (bytes >= 2 ** 20) return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  return `${(bytes / 2 ** 10).toFixed(1)} KiB`;
}

/**
 * Sizes an engine for (dir, params). A kvCacheBytes too small for maxContext is an answer here (`fits: false` and
 * what to raise it to), where `Engine.load` rejects with ERR_OUT_OF_MEMORY.
 * @internal
 */
export async function estimateMemory(addon: NativeAddon, dir: string, params: NativeLoadParams): Promise<MemoryEstimate> {
  let failure: unknown;
  try {
    return toMemoryEstimate(await addon.estimate(dir, params), params);
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_OUT_OF_MEMORY' || params.kvCacheBytes === 0) throw fromNativeError(err);
    failure = err;
  }
  // The pool asked for holds fewer tokens than maxContext. Everything else does not depend on kvCacheBytes: size it
  // with the default pool, then put the asked pool in its place, cut to whole blocks as the native plan does.
  let base: NativeEstimate;
  try {
    base = await addon.estimate(dir, { ...params, kvCacheBytes: 0 });
  } catch (err) {
    throw fromNativeError(err);
  }
  const perToken = (base.kvCacheBytes - base.stateSlotBytes) / base.kvCacheTokens;
  const blockSize = params.kvBlockSize || DEFAULT_BLOCK_SIZE;
  const tokens = Math.floor(Math.floor(params.kvCacheBytes / perToken) / blockSize) * blockSize;
  if (tokens >= base.maxContext) throw fromNativeError(failure); // not a short pool: some other failure (a mapping)
  const initial = Math.min(base.kvCacheInitialTokens, tokens);
  return toMemoryEstimate(
    {
      ...base,
      kvCacheBytes: tokens * perToken + base.stateSlotBytes,
      kvCacheTokens: tokens,
      kvCacheInitialBytes: initial * perToken + base.stateSlotInitialBytes,
      kvCacheInitialTokens: initial,
    },
    params,
  );
}

/** The public estimate of a native one, with `fits` and the suggestion. @internal */
export function toMemoryEstimate(n: NativeEstimate, params: NativeLoadParams): MemoryEstimate {
  // The CUDA backend reports device weights (and then its KV pool and workspaces are device memory too).
  const device = n.weightDeviceBytes > 0 ? 'cuda' : 'cpu';
  // The load maps the pool's initial part; it grows from there as requests need blocks.
  const onDevice = device === 'cuda' ? n.kvCacheInitialBytes + n.workspaceBytes : 0;
  const bytesPerToken = n.kvCacheTokens > 0 ? (n.kvCacheBytes - n.stateSlotBytes) / n.kvCacheTokens : 0;
  const est: MemoryEstimate = {
    device,
    maxContext: n.maxContext,
    weights: {
      totalBytes: n.weightBytes,
      deviceBytes: n.weightDeviceBytes,
      hostBytes: n.weightHostBytes,
      mappedBytes: n.weightMappedBytes,
      skippedBytes: n.weightSkippedBytes,
    },
    kvCache: {
      bytes: n.kvCacheBytes,
      stateSlotBytes: n.stateSlotBytes,
      tokens: n.kvCacheTokens,
      bytesPerToken,
      initialBytes: n.kvCacheInitialBytes,
      initialTokens: n.kvCacheInitialTokens,
      stateSlotInitialBytes: n.stateSlotInitialBytes,
    },
    workspaceBytes: n.workspaceBytes,
    pinnedHostBytes: n.hostPinnedBytes,
    totals: {
      hostHeapBytes: n.weightHostBytes + (device === 'cpu' ? n.kvCacheBytes + n.workspaceBytes : 0) + n.hostPinnedBytes,
      pageCacheBytes: n.weightMappedBytes,
      deviceBytes: n.weightDeviceBytes + onDevice,
    },
    hostAvailableBytes: n.hostAvailableBytes >= 0 ? n.hostAvailableBytes : null,
    fits: true,
  };
  const advice = advise(est, params, bytesPerToken);
  if (advice) {
    est.fits = false;
    est.suggestion = advice.suggestion;
    if (advice.options) est.suggestedOptions = advice.options;
  }
  return est;
}

interface Advice {
  suggestion: string;
  options?: MemoryEstimate['suggestedOptions'];
}

/** Why these options would not load, and what would; undefined when they would. */
function advise(est: MemoryEstimate, params: NativeLoadParams, perToken: number): Advice | undefined {
  const blockSize = params.kvBlockSize || DEFAULT_BLOCK_SIZE;
  const M = est.maxContext;
  const tokens = est.kvCache.tokens;
  const pool = (t: number): number => Math.ceil(t / blockSize) * blockSize * perToken;
  const kvOnHost = est.device === 'cpu';
  const available = est.hostAvailableBytes;
  const heapFits = available === null || est.totals.hostHeapBytes <= available;
  if (tokens >= M && heapFits) return undefined;

  // What the KV pool may take: MemAvailable less headroom, less the rest of the host heap (weight copies, workspace).
  // (the state slots stay: they are per seat, not per token)
  const otherHeap = est.totals.hostHeapBytes - (kvOnHost ? est.kvCache.bytes - est.kvCache.stateSlotBytes : 0);
  const room = available === null || !kvOnHost ? Infinity : Math.floor(available * (1 - HEADROOM)) - otherHeap;
  const head =
    tokens < M
      ? `kvCacheBytes ${params.kvCacheBytes} holds ${tokens} tokens, fewer than maxContext ${M} (each token needs ${perToken} bytes)`
      : `this engine needs ${size(est.totals.hostHeapBytes)} of host memory (KV cache ${size(est.kvCache.bytes)} for ${tokens} ` +
        `tokens, workspaces ${size(est.workspaceBytes)}, weight copies ${size(est.weights.hostBytes)}) but ${size(available!)} is available`;

  if (tokens < M && pool(M) <= room) {
    const lower = tokens >= 1 ? `, or lower maxContext to ${tokens}` : '';
    return { suggestion: `${head}: raise kvCacheBytes to at least ${pool(M)} (${size(pool(M))})${lower}.`, options: { kvCacheBytes: pool(M) } };
  }
  // The largest pool that fits, in whole blocks, and the longest context it allows.
  const poolTokens = Math.floor(room / perToken / blockSize) * blockSize;
  if (!(poolTokens >= 1)) {
    return {
      suggestion:
        `${head}, and the workspaces and weight copies (${size(otherHeap)}) leave no room for a KV cache in ` +
        `${size(available ?? 0)}: lower maxBatchTokens or maxSeqs, or free memory.`,
    };
  }
  const fitContext = Math.min(M, poolTokens);
  // With kvCacheBytes left to its default the pool is max(maxContext, 4096) tokens (vt_engine.h): lowering
  // maxContext alone is enough when that pool fits.
  if (params.kvCacheBytes === 0 && pool(Math.max(fitContext, 4096)) <= room) {
    return { suggestion: `${head}: lower maxContext to ${fitContext} or less.`, options: { maxContext: fitContext } };
  }
  const bytes = poolTokens * perToken;
  const options: MemoryEstimate['suggestedOptions'] = { kvCacheBytes: bytes };
  if (fitContext < M) options.maxContext = fitContext;
  const andContext = fitContext < M ? ` and maxContext to ${fitContext} or less` : '';
  return { suggestion: `${head}: set kvCacheBytes to ${bytes} (${size(bytes)}, ${poolTokens} tokens) or less${andContext}.`, options };
}

/**
 * An ERR_OUT_OF_MEMORY from `Engine.load`, restated with the figures and the option that would make it fit (from
 * the estimate of the same options). Any other error, or one the estimate cannot improve on, is returned as is.
 * @internal
 */
export async function explainOutOfMemory(
  err: EngineError,
  addon: NativeAddon,
  dir: string,
  params: NativeLoadParams,
): Promise<EngineError> {
  if (err.code !== 'ERR_OUT_OF_MEMORY') return err;
  let est: MemoryEstimate;
  try {
    est = await estimateMemory(addon, dir, params);
  } catch {
    return err;
  }
  if (est.fits || !est.suggestion) return err; // memory came free meanwhile, or an mmap failed: keep the native word
  return new OutOfMemoryError(`Engine.load: ${est.suggestion} Engine.estimate() gives these figures without loading.`, {
    cause: err,
  });
}

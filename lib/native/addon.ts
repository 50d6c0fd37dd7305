/**
 * The shape of the native addon (binding/), as TypeScript sees it. Internal: the public API wraps it.
 * @internal
 * @module
 */
import { createRequire } from 'node:module';
import { type AddonBinary, resolveAddon } from './addon-path.js';

/** @internal Load parameters, mirrored field by field into vt_engine_params. */
export interface NativeLoadParams {
  device: 'auto' | 'cpu' | 'cuda';
  threads: number; // 0 = all cores
  maxContext: number; // 0 = model default
  maxSeqs: number; // 0 = default
  maxBatchTokens: number; // 0 = default
  kvBlockSize: number; // 0 = default
  kvCacheBytes: number; // 0 = default
  gpuMemoryUtilization: number; // 0 = unset
  dtype: 'auto' | 'float32' | 'bfloat16'; // LoadOptions.activationDtype (vt_engine_params.dtype)
  cudaGraphs: NativeCudaGraphs;
  prefixCaching?: boolean; // vt_engine_params.prefix_caching: 1 (true), -1 (false), or absent: 0 (the default)
}

/** @internal vt_cuda_graphs, field by field (the binding keeps the engine's defaults when it is absent). */
export interface NativeCudaGraphs {
  enabled: -1 | 0 | 1; // -1 = default (on)
  maxBatch: number; // 0 = default
  buckets: number[]; // empty = default
  dedup: boolean;
  firstUse: boolean; // capture: 'first-use'
}

/** @internal */
export interface NativeModelInfo {
  architecture: string;
  device: 'cpu' | 'cuda';
  vocabSize: number;
  hiddenSize: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  headDim: number;
  maxContext: number;
  maxPositionEmbeddings: number;
  bosTokenId: number; // -1 when none
  eosTokenIds: number[];
  nParams: number;
  weightBytes: number;
  dtype: string;
}

/** @internal Mirrors vt_request_params. */
export interface NativeRequestParams {
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed?: number; // integer in [0, 2^53); absent = the engine draws one
  logprobs: number;
  stopTokenIds?: number[]; // absent = the model's eos ids; [] = none
  repetitionPenalty?: number; // > 0; 1 = off (transformers' RepetitionPenaltyLogitsProcessor, over prompt + output)
  presencePenalty?: number; // 0 = off (OpenAI semantics, over generated tokens)
  frequencyPenalty?: number; // 0 = off (OpenAI semantics, over generated tokens)
  logitBias?: Array<[tokenId: number, bias: number]>; // added to the raw logits before everything else
  promptLogprobs?: boolean; // report the logprob of every prompt token after the first (teacher forcing)
  allowedTokens?: number; // backpressure from the first step (allowTokens' meaning); absent = -1, no limit
}

/** @internal Finish codes, as vt_finish. */
export const enum NativeFinish {
  None = 0,
  Eos = 1,
  Length = 2,
  Abort = 3,
  Error = 4,
}

/** @internal One request's share of one engine step. */
export interface NativeStepEvent {
  id: number;
  token: number; // -1 when the event only carries a finish
  finish: NativeFinish;
  logprob?: number; // when the request asked for logprobs
  topIds?: number[];
  topLogprobs?: number[];
  promptTokens?: number; // on the finishing event
  completionTokens?: number; // on the finishing event
  message?: string; // finish === Error
  /** With promptLogprobs: logprobs of prompt tokens [promptLogprobsStart, promptLogprobsStart + length). */
  promptLogprobs?: number[];
  promptLogprobsStart?: number;
}

/** @internal */
export interface NativeStats {
  kvBlocksTotal: number;
  kvBlocksUsed: number;
  kvBlockSize: number;
  kvCacheBytes: number;
  requestsWaiting: number;
  requestsRunning: number;
  requestsPaused: number;
  steps: number;
  tokensGenerated: number;
  preemptions: number;
  prefixCacheQueries: number;
  prefixCacheQueryTokens: number;
  prefixCacheHitTokens: number;
  prefixCacheBlocks: number;
  prefixCacheEvictions: number;
  kvBlocksMapped: number; // of kvBlocksTotal (the ceiling), usable now: a CUDA pool's mapped chunks; all on the CPU
  kvCacheResidentBytes: number; // the pool's memory now: CUDA, the mapped chunks and state slots; CPU, pages written
  stateSlotsTotal: number; // a slot per seat for models whose recurrent layers keep a state; 0 for the others
  stateSlotsMapped: number; // of stateSlotsTotal, usable now: CUDA's mapped chunks; all on the CPU
  stateSlotsHeld: number; // held by running (or paused) requests
}

/** @internal Mirrors vt_memory_report. */
export interface NativeMemory {
  weightDeviceBytes: number;
  weightHostBytes: number;
  weightMappedBytes: number;
  weightMappedResidentBytes: number;
  kvCacheBytes: number;
  kvCacheResidentBytes: number;
  kvBlocksTotal: number;
  kvBlocksMapped: number;
  kvBlocksUsed: number;
  kvBlockSize: number;
  workspaceBytes: number;
  graphsCount: number;
  graphsBytes: number; // -1 = not measurable
  hostPinnedBytes: number; // page-locked host staging of the CUDA backend; 0 on the CPU
  stateSlotBytes: number; // the recurrent layers' state slots held now (CUDA: the mapped chunks; CPU: all)
  weightSkippedBytes: number; // tensors the text model never reads (a vision tower, an MTP head)
  weightSkippedResidentBytes: number; // of those, in memory now (whole pages)
  gpuDevice: number; // CUDA ordinal; -1 on the CPU backend
  gpuTotalBytes: number; // -1 on the CPU backend
  gpuFreeBytes: number; // -1 on the CPU backend, or when the driver did not answer
  gpuUnifiedMemory: boolean;
  gpuName: string; // '' on the CPU backend
}

/** @internal Mirrors vt_memory_estimate. */
export interface NativeEstimate {
  weightBytes: number;
  weightDeviceBytes: number;
  weightHostBytes: number;
  weightMappedBytes: number;
  kvCacheBytes: number; // the pool's ceiling (and the state slots)
  kvCacheTokens: number;
  kvCacheInitialBytes: number; // what the load maps of it, and keeps when idle
  kvCacheInitialTokens: number;
  workspaceBytes: number;
  maxContext: number;
  hostAvailableBytes: number; // -1 = unknown
  hostPinnedBytes: number; // page-locked host staging of the CUDA backend; 0 on the CPU
  stateSlotBytes: number; // of kvCacheBytes, the recurrent layers' state slots
  weightSkippedBytes: number; // tensors the text model never reads (a vision tower, an MTP head)
  stateSlotInitialBytes: number; // of kvCacheInitialBytes, the state slots (CUDA: their first chunk; CPU: all)
}

/** @internal One GPU of NativeSystemInfo (vt_gpu_info). */
export interface NativeGpuInfo {
  name: string;
  ccMajor: number;
  ccMinor: number;
  totalBytes: number;
  integrated: boolean;
  code: 'cubin' | 'ptx' | 'none';
  codeTarget: string; // '' with code 'none'
  usable: boolean;
  reason: string; // '' when usable
}

/** @internal Mirrors vt_system_info; space-separated lists arrive as arrays, '' means "none". */
export interface NativeSystemInfo {
  cpuArch: string;
  cpuFeatures: string[];
  cpuFeaturesAbsent: string[];
  cpuMatmul: string;
  cpuMatmulPaths: string[];
  cpuThreads: number;
  kernelImages: number;
  cudaTargets: string[];
  kernelsProblem: string;
  minDriverVersion: number; // 13000 = CUDA 13.0
  driverFound: boolean;
  driverVersion: number; // 0 = unknown
  driverProblem: string;
  gpuCount: number;
  gpus: NativeGpuInfo[];
  cublasLtFound: boolean;
  cublasLtVersion: number;
  cublasLtPath: string;
  cublasLtProblem: string;
  cudaUsable: boolean;
  autoDevice: 'cuda' | 'cpu';
  autoReason: string;
  gemmFamily: string; // '' without a usable GPU
  gemmMeasured: string;
  gemmRules: string; // 'a; b; c'
}

/**
 * @internal A loaded engine. Errors thrown by its methods (and by loadEngine's promise) are plain Errors with
 * `code` set to a stable status name ('ERR_BAD_CHECKPOINT', ...); lib/errors.ts turns them into EngineErrors.
 */
export interface NativeEngine {
  modelInfo(): NativeModelInfo;
  /** Queues a request; returns its id. Throws synchronously on invalid input. */
  submit(tokens: Int32Array, params: NativeRequestParams): number;
  abort(id: number): void;
  /**
   * Backpressure: the request may generate `tokens` tokens in all (-1: no limit), then pauses until allowed more
   * (vt_engine_allow_tokens). Throws (code ERR_INVALID_OPTION) for an id the engine never issued.
   */
  allowTokens(id: number, tokens: number): void;
  /**
   * How many requests in flight are paused for readers that stopped reading: they wait on JS alone, so the engine
   * does not keep the process alive for them.
   */
  setPausedRequests(n: number): void;
  stats(): NativeStats;
  memory(): NativeMemory;
  /** Ends every live request (each gets an Abort event), joins the step thread, frees the model. */
  dispose(): Promise<void>;
}

/** @internal */
export interface NativeAddon {
  /**
   * Loads on a worker thread. `onProgress` runs on the JS thread. `onStep` receives every step's events for all
   * requests, in order, on the JS thread. `cancel` is a 1-element Int32Array over a SharedArrayBuffer: setting
   * cancel[0] = 1 stops the load with code ERR_CANCELLED.
   */
  loadEngine(
    dir: string,
    params: NativeLoadParams,
    onProgress: (fraction: number, stage: string) => void,
    onStep: (events: NativeStepEvent[]) => void,
    cancel: Int32Array,
  ): Promise<NativeEngine>;
  /** Sizes an engine for (dir, params) without loading it; rejects like loadEngine on a bad checkpoint. */
  estimate(dir: string, params: NativeLoadParams): Promise<NativeEstimate>;
  /** The machine and this binary, without a model (vt_system_info_get). Synchronous. */
  systemInfo(): NativeSystemInfo;
  /**
   * Stops every engine of this thread now (ending its live requests, joining its step thread) and asks every load
   * in flight to stop. Synchronous; for process.on('exit') (binding/live_set.h says why).
   */
  shutdownAll(): void;
}

let cached: NativeAddon | undefined;
let loadedFrom: AddonBinary | undefined;

/**
 * @internal Loads the addon once, from the file node-gyp-build resolves (build/Release if built here, else the
 * prebuild for this platform; in an Electron app, from app.asar.unpacked: see addon-path.ts).
 */
export function nativeAddon(): NativeAddon {
  if (!cached) {
    const binary = resolveAddon();
    const addon = createRequire(import.meta.url)(binary.path) as NativeAddon;
    // A script may end (or call process.exit(), or throw) with engines loaded and no dispose(): their step threads
    // must stop before Node tears down what they post to. 'exit' is per thread, so a worker thread gets its own.
    process.on('exit', () => addon.shutdownAll());
    cached = addon;
    loadedFrom = binary;
  }
  return cached;
}

/** @internal The binary nativeAddon() loaded (it loads it if that has not happened yet). */
export function nativeAddonBinary(): AddonBinary {
  nativeAddon();
  return loadedFrom as AddonBinary;
}

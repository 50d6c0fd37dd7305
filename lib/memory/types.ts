/**
 * What `engine.memory()`, `engine.trackMemory()` and `Engine.estimate()` report. Every figure is in bytes. A figure
 * that cannot be measured here is `null`, with the reason beside it — never a guess and never an exception.
 * @module
 */
import type { LoadOptions } from '../engine/load-options.js';

/**
 * Where bytes live. `'host'`: anonymous host memory the engine allocated (heap, KV pool on the CPU); `'mapped'`: the
 * checkpoint files' mappings, i.e. page cache the kernel may drop and read again; `'device'`: GPU memory.
 */
export type MemoryTier = 'host' | 'mapped' | 'device';

/** This process's memory, from `/proc/self/smaps_rollup` (or the sum of `/proc/self/smaps` on old kernels). */
export interface ProcessMemory {
  /** Resident set: every page mapped and in memory, shared ones counted whole. */
  rssBytes: number;
  /** Proportional set: shared pages divided among the processes that map them. The honest "what this costs". */
  pssBytes: number;
  /** Unique set: pages no other process maps (Private_Clean + Private_Dirty); what exiting would free at least. */
  ussBytes: number;
  /** Pages of this process in swap. */
  swapBytes: number;
  /** PSS of anonymous memory (heap, KV pool); null where the kernel does not split it (before Linux 5.4, smaps). */
  pssAnonBytes: number | null;
  /** PSS of file mappings (the checkpoint, shared libraries); null where the kernel does not split it. */
  pssFileBytes: number | null;
  /** The procfs file the figures come from. */
  source: 'smaps_rollup' | 'smaps';
}

/** The machine's memory, from `/proc/meminfo`. */
export interface SystemMemory {
  /** MemTotal. */
  totalBytes: number;
  /** MemAvailable: what could be allocated without swapping (free memory plus reclaimable caches). */
  availableBytes: number;
}

/**
 * One GPU the engine uses. The driver's figures (`totalBytes`, `freeBytes`) are read when the snapshot is taken;
 * `processBytes` comes from NVML, loaded at run time from the driver's `libnvidia-ml.so.1`.
 */
export interface GpuDeviceMemory {
  /** CUDA device ordinal (0: the engine runs on the first visible GPU). */
  index: number;
  /** The device's name, such as `'NVIDIA H200'`. */
  name: string;
  /** Memory of the device, from the driver (`cuMemGetInfo`). */
  totalBytes: number;
  /**
   * Memory free on the device now, from the driver (`cuMemGetInfo`), all processes considered; null when the
   * driver does not answer (a failed kernel can leave the GPU unusable), with the reason in `reasons.gpu`.
   */
  freeBytes: number | null;
  /**
   * Bytes this process holds on the device, from NVML (`nvmlDeviceGetComputeRunningProcesses`): the engine's
   * weights, KV pool and workspaces plus the CUDA context itself. Null, with the reason in
   * {@link processBytesReason} (and in `reasons.gpu`), when NVML is absent or fails, when it answers "not
   * available" (as on unified-memory GPUs such as GB10), or when its list has no entry for this process's pid (in a
   * container NVML may list the host's pids).
   */
  processBytes: number | null;
  /** Why {@link processBytes} is null. */
  processBytesReason?: string;
  /**
   * The device is integrated and shares the host's memory (GB10, Jetson Thor): its bytes are host bytes too, and
   * count against MemAvailable.
   */
  unifiedMemory: boolean;
}

/** GPU memory; present only when the engine runs on a GPU. */
export interface GpuMemory {
  /** Every device the engine uses (one today: CUDA device 0). */
  devices: GpuDeviceMemory[];
}

/** Why a figure is null, by the name of the figure (`process`, `system`, `gpu`); empty when none is. */
export type MemoryReasons = Partial<Record<'process' | 'system' | 'gpu', string>>;

/** One part of what the engine holds. The components sum to {@link EngineMemory.totalBytes}. */
export interface MemoryComponent {
  /** `'weights'`, `'kv_cache'`, `'workspace'`, `'cuda_graphs'`, `'pinned_staging'`; later `'vision_tower'` and others. */
  name: string;
  /**
   * Bytes held (reserved or mapped), resident or not. A GPU's KV pool counts the device memory it has mapped (its
   * ceiling is address space, not memory: `kvCache.bytes`).
   */
  bytes: number;
  /** Where they live. */
  tier: MemoryTier;
}

/** The engine's own accounting: what it holds, by kind and by tier. */
export interface EngineMemory {
  /** The model's weights, by tier. */
  weights: {
    /** Weights in GPU memory (0 on the CPU backend). */
    deviceBytes: number;
    /**
     * Weights copied into host memory: fp32 copies of the norms and biases (the big matrices are used in place).
     * Their originals are in the mapping too, so this overlaps `mappedBytes` by its size in the source dtype.
     */
    hostBytes: number;
    /** Weights read in place from the checkpoint's file mappings: every tensor the model uses, as stored. */
    mappedBytes: number;
    /**
     * Of the checkpoint files' mappings (headers and unused tensors included), the bytes in memory now (`mincore`).
     * This is page-cache residency: pages another process or an earlier read brought in count, and the kernel may
     * drop them under pressure.
     */
    mappedResidentBytes: number;
    /**
     * Tensors in the checkpoint the language model never reads (a vision tower, an MTP head): not copied, not
     * uploaded, and in no other figure here. 0 for a checkpoint of the text model alone.
     */
    skippedBytes: number;
    /**
     * Of `skippedBytes`, the bytes in memory now (`mincore`, whole pages): the engine reads the files only where the
     * language model's tensors lie and drops the skipped ones' pages, so this stays 0 unless another process reads
     * them.
     */
    skippedResidentBytes: number;
  };
  /** The paged KV cache. */
  kvCache: {
    /**
     * The paged KV pool as reserved: its ceiling (virtual: on the CPU pages cost memory once written; on the GPU
     * device memory is mapped in chunks as requests need blocks), with the state slots' ceiling (a slot per seat).
     */
    bytes: number;
    /**
     * The state slots' memory held now: the fixed-size state each request keeps in a model's recurrent layers
     * (Qwen3.5 / Qwen3.6's Gated DeltaNet); 0 for models without. On the GPU the mapped chunks of slots, which grow
     * as requests take slots (from one chunk at load) and shrink back when the engine is idle, at most a slot per
     * seat (`maxSeqs`); on the CPU all of them, a slot per seat, part of `bytes` (their pages committed as written).
     */
    stateSlotBytes: number;
    /**
     * Of the pool, the memory it holds now: on the CPU the pages written so far (`mincore`, which never shrinks);
     * on the GPU the mapped chunks, which grow with demand and shrink back to the load's size when the engine is
     * idle. Null when the kernel does not say.
     */
    residentBytes: number | null;
    /** Blocks the pool may hold at most (its ceiling). */
    blocksTotal: number;
    /** Of `blocksTotal`, the blocks usable now without mapping more (all of them on the CPU). */
    blocksMapped: number;
    /**
     * Blocks held by live requests now. Blocks the prefix cache keeps that no request holds count as free (a new
     * request's KV takes them when no block is truly free); `engine.stats().prefixCacheBlocks` counts them.
     */
    blocksUsed: number;
    /** Tokens per block. */
    blockSize: number;
  };
  /** Captured CUDA graphs. */
  graphs: {
    /** CUDA graphs captured (0 on the CPU backend). */
    count: number;
    /** Their device bytes; null when not measurable. */
    bytes: number | null;
  };
  /** Activations, logits and sampler scratch, sized at load for maxBatchTokens and maxSeqs. */
  workspaceBytes: number;
  /**
   * Page-locked host memory the CUDA backend stages each step through (the step's token ids, positions and block
   * tables, the sampled ids and logprobs, the logits processors' lists); 0 on the CPU backend. It is in the
   * process's RSS and cannot be swapped or reclaimed. (While a model loads, 64 MiB more is pinned for the weights'
   * upload, and freed before `Engine.load` resolves.)
   */
  pinnedHostBytes: number;
  /** Everything above, one entry per kind and tier. Sums to {@link totalBytes}. */
  components: MemoryComponent[];
  /** The sum of {@link components}: what the engine holds at most, resident or not. */
  totalBytes: number;
}

/**
 * What `engine.memory()` returns. `process` and `system` are null off Linux (see `reasons`); `gpu` is absent on
 * the CPU backend.
 */
export interface MemorySnapshot {
  /** When the snapshot was taken (`Date.now()`). */
  takenAt: number;
  /** This process, from procfs; null off Linux. */
  process: ProcessMemory | null;
  /** The machine, from procfs; null off Linux. */
  system: SystemMemory | null;
  /** The GPUs; absent on the CPU backend. */
  gpu?: GpuMemory;
  /** The engine's own accounting. */
  engine: EngineMemory;
  /** Why `process` or `system` is null, or a figure of `gpu`. */
  reasons: MemoryReasons;
}

/** One sample of a {@link MemoryTracker}. */
export interface MemorySample {
  /** Milliseconds since the tracker started. */
  atMs: number;
  /** This process's PSS. */
  pssBytes: number | null;
  /** This process's RSS. */
  rssBytes: number | null;
  /**
   * This process's GPU bytes, from NVML (see {@link GpuDeviceMemory.processBytes}); null on the CPU backend or when
   * NVML does not say, with the reason in the peaks' `reasons.gpu`.
   */
  gpuBytes: number | null;
  /** MemAvailable. */
  availableBytes: number | null;
}

/** Options of `engine.trackMemory()`. */
export interface TrackMemoryOptions {
  /** Milliseconds between samples, 10 to 3,600,000. Default 100. */
  intervalMs?: number;
  /**
   * Called with every sample, the baseline and the final one included. It must not throw: an error it throws stops
   * the tracker, and `stop()` throws it again.
   */
  onSample?: (sample: MemorySample) => void;
}

/** What `tracker.stop()` returns: the peaks over the window from start to stop. */
export interface MemoryPeaks {
  /** Peak PSS of this process. */
  pssBytes: number | null;
  /** Peak RSS of this process. */
  rssBytes: number | null;
  /** Peak GPU bytes of this process, from NVML; null on the CPU backend or when NVML never said. */
  gpuBytes: number | null;
  /** The largest fall of MemAvailable below the baseline (0 when it never fell). */
  availableDropBytes: number | null;
  /** When each peak happened, in milliseconds since the start (the first sample that reached it). */
  at: PeakTimes;
  /** The first sample, taken when the tracker started. */
  baseline: MemorySample;
  /** Samples taken, the baseline and the final one (taken by `stop()`) included. */
  samples: number;
  /** Milliseconds from start to stop. */
  durationMs: number;
  /** Milliseconds between samples. */
  intervalMs: number;
  /** Why a peak is null. */
  reasons: MemoryReasons;
}

/** When each peak of {@link MemoryPeaks} happened, in milliseconds since the tracker started; null when not measured. */
export interface PeakTimes {
  /** Of the peak PSS. */
  pss: number | null;
  /** Of the peak RSS. */
  rss: number | null;
  /** Of the peak GPU bytes. */
  gpu: number | null;
  /** Of the largest MemAvailable drop. */
  availableDrop: number | null;
}

/**
 * What `Engine.estimate()` returns: the bytes each tier would need for a checkpoint and load options, computed from
 * `config.json` and the safetensors headers, before anything is loaded. The sizing is the same code `Engine.load`
 * runs, so the KV pool and workspace figures are exactly what a loaded engine reports in `memory().engine`.
 */
export interface MemoryEstimate {
  /** Where the engine would run (the CPU until the CUDA backend reports device weights). */
  device: 'cpu' | 'cuda';
  /** Tokens per sequence after the options (the model's default when left out). */
  maxContext: number;
  /** The weights, by tier. */
  weights: {
    /** Every tensor the model uses, as stored (a tied embedding once). */
    totalBytes: number;
    /** In GPU memory. */
    deviceBytes: number;
    /** fp32 copies of norms and biases in host memory. */
    hostBytes: number;
    /** Read in place from the checkpoint files' mappings (page cache). */
    mappedBytes: number;
    /** In the checkpoint but never read by the language model (a vision tower, an MTP head); in no figure above. */
    skippedBytes: number;
  };
  /** The paged KV pool. */
  kvCache: {
    /** The KV pool's ceiling: what it may hold at most (with the state slots). */
    bytes: number;
    /**
     * Of `bytes`, the state slots of a model's recurrent layers (one per seat, as laid out: padded on the GPU, where
     * they are mapped in chunks as requests take them); 0 for models without.
     */
    stateSlotBytes: number;
    /** Tokens the ceiling holds, over all sequences. */
    tokens: number;
    /** Bytes of one token's keys and values over the attention layers. */
    bytesPerToken: number;
    /**
     * What the load maps, and the pool keeps when the engine is idle: on the GPU room for max(maxContext, 4096)
     * tokens in whole chunks (at most the ceiling; more is mapped as requests need it) and the state slots' first
     * chunk; on the CPU the whole pool.
     */
    initialBytes: number;
    /** Tokens `initialBytes` holds. */
    initialTokens: number;
    /** Of `initialBytes`, the state slots: on the GPU their first chunk, on the CPU all of them; 0 for models without. */
    stateSlotInitialBytes: number;
  };
  /** Activations, logits and sampler scratch. */
  workspaceBytes: number;
  /** Page-locked host staging of the CUDA backend (see {@link EngineMemory.pinnedHostBytes}); 0 on the CPU. */
  pinnedHostBytes: number;
  /** The same bytes by tier. */
  totals: {
    /**
     * Anonymous host memory: host weight copies, plus the KV pool and workspace on the CPU, plus the pinned staging
     * on the GPU.
     */
    hostHeapBytes: number;
    /** Page cache of the checkpoint files the engine reads in place. */
    pageCacheBytes: number;
    /** GPU memory at load (weights, the KV pool's initial part, workspaces); the pool may grow to its ceiling. */
    deviceBytes: number;
  };
  /** MemAvailable now; null when it cannot be read. */
  hostAvailableBytes: number | null;
  /**
   * Whether `Engine.load` would accept these options now: the KV pool holds at least `maxContext` tokens and
   * `totals.hostHeapBytes` fits in MemAvailable — the checks `Engine.load` makes. The mapped weights are not
   * counted: they are page cache, which the kernel reclaims (a model larger than memory still runs, reading from
   * disk at every step).
   */
  fits: boolean;
  /** When it does not fit: what to change, naming the option. */
  suggestion?: string;
  /** When it does not fit: load options that would (merge them into yours), when some would. */
  suggestedOptions?: Pick<LoadOptions, 'maxContext' | 'kvCacheBytes'>;
}

/**
 * Facts about a loaded model and the engine's live counters, as the public API shows them.
 * @module
 */
import type { NativeModelInfo, NativeStats } from '../native/addon.js';

/** Facts about the loaded model, read from its checkpoint and the load options. */
export interface ModelInfo {
  /** The architecture named in `config.json`, such as `'Qwen3ForCausalLM'`. */
  readonly architecture: string;
  /** Where the model runs. */
  readonly device: 'cpu' | 'cuda';
  /** Tokens in the vocabulary: valid token ids are 0 to `vocabSize - 1`. */
  readonly vocabSize: number;
  /** Width of the hidden state. */
  readonly hiddenSize: number;
  /** Transformer layers. */
  readonly nLayers: number;
  /** Attention (query) heads. */
  readonly nHeads: number;
  /** Key/value heads (fewer than `nHeads` with grouped-query attention). */
  readonly nKvHeads: number;
  /** Width of one attention head. */
  readonly headDim: number;
  /** Tokens per sequence (prompt + generated) this engine allows, after the load options. */
  readonly maxContext: number;
  /** Positions the model was trained for (`max_position_embeddings` in `config.json`). */
  readonly maxPositionEmbeddings: number;
  /** The beginning-of-sequence token id, or `null` when the model has none. */
  readonly bosTokenId: number | null;
  /** The end-of-sequence token ids: the default `stopTokenIds` of a generation. */
  readonly eosTokenIds: readonly number[];
  /** Parameters of the model. */
  readonly nParams: number;
  /** Bytes of all the tensors the model uses. */
  readonly weightBytes: number;
  /** The dominant weight dtype: `'bfloat16'`, `'float16'` or `'float32'`. */
  readonly dtype: string;
}

/** Live counters of an engine, from `engine.stats()`. */
export interface EngineStats {
  /**
   * Blocks the paged KV-cache pool may hold at most: its ceiling. On the GPU the pool maps device memory for
   * {@link kvBlocksMapped} of them, growing as requests need blocks and shrinking back when the engine is idle; on
   * the CPU the pool is fixed and every block is mapped.
   */
  kvBlocksTotal: number;
  /** Of `kvBlocksTotal`, the blocks usable now without mapping more (all of them on the CPU). */
  kvBlocksMapped: number;
  /**
   * Blocks held by live requests; back to the pool when a request ends or is aborted (a block shared by several
   * requests through the prefix cache counts once; a cached block no request holds counts as free).
   */
  kvBlocksUsed: number;
  /** Tokens per KV block. */
  kvBlockSize: number;
  /** The KV-cache pool's ceiling in bytes, as reserved (and the state slots of models that keep one per request). */
  kvCacheBytes: number;
  /**
   * The memory the KV-cache pool holds now: on the GPU the mapped chunks (and the state slots), on the CPU the
   * pages written so far.
   */
  kvCacheResidentBytes: number;
  /**
   * State slots (Qwen3.5 / Qwen3.6: a fixed-size state per request in their DeltaNet layers; 0 for models without):
   * one per seat (`maxSeqs`) at most.
   */
  stateSlotsTotal: number;
  /**
   * Of `stateSlotsTotal`, the slots usable now without mapping more: on the GPU their memory is mapped in chunks as
   * requests take slots and given back above the load's when the engine is idle; on the CPU all of them.
   */
  stateSlotsMapped: number;
  /** Slots held by requests (running, or paused with their state). */
  stateSlotsHeld: number;
  /** Requests queued, not yet scheduled. */
  requestsWaiting: number;
  /** Requests being prefilled or decoded. */
  requestsRunning: number;
  /**
   * Requests paused because their reader fell behind: a `for await` loop (or other reader of a generation's
   * iterator) that stopped taking chunks. They hold no seat in the batch and resume when read.
   */
  requestsPaused: number;
  /** Engine steps run since load. */
  steps: number;
  /** Tokens generated since load, over all requests. */
  tokensGenerated: number;
  /**
   * Times KV blocks were taken back from a request to make room: a paused request's (it is recomputed when its
   * reader catches up), or else the newest running one's (it is requeued and recomputed).
   */
  preemptions: number;
  /**
   * Prefix caching (the `prefixCaching` load option; every `prefixCache*` counter stays 0 when it is off): the
   * times a request looked its tokens up in the cache as it was admitted. That is once per request, and again each
   * time its KV was taken back (a preemption) and it is computed anew; a request asking for prompt logprobs does not
   * look (it computes every prompt position).
   */
  prefixCacheQueries: number;
  /** The tokens those lookups were for: each request's prompt (plus what it had generated, after a preemption). */
  prefixCacheQueryTokens: number;
  /**
   * Of `prefixCacheQueryTokens`, the tokens whose KV was found in the cache and not computed again. The hit
   * rate is `prefixCacheHitTokens / prefixCacheQueryTokens`. Always whole KV blocks, and never a request's last
   * token, whose logits give its first new token (a prompt cached to its end computes its last block again).
   */
  prefixCacheHitTokens: number;
  /**
   * KV blocks in the prefix cache now, held by live requests or not. Those no request holds are counted as free,
   * not in `kvBlocksUsed`: a new request's KV takes the least recently used of them when no block is truly
   * free.
   */
  prefixCacheBlocks: number;
  /** Cached KV blocks dropped from the prefix cache since load to make room for new KV. */
  prefixCacheEvictions: number;
}

/** The public, frozen view of the native model info. @internal */
export function toModelInfo(info: NativeModelInfo): ModelInfo {
  return Object.freeze({
    architecture: info.architecture,
    device: info.device,
    vocabSize: info.vocabSize,
    hiddenSize: info.hiddenSize,
    nLayers: info.nLayers,
    nHeads: info.nHeads,
    nKvHeads: info.nKvHeads,
    headDim: info.headDim,
    maxContext: info.maxContext,
    maxPositionEmbeddings: info.maxPositionEmbeddings,
    bosTokenId: info.bosTokenId >= 0 ? info.bosTokenId : null,
    eosTokenIds: Object.freeze([...info.eosTokenIds]),
    nParams: info.nParams,
    weightBytes: info.weightBytes,
    dtype: info.dtype,
  });
}

/** A copy of the native counters, so callers cannot hold a live native object. @internal */
export function toEngineStats(stats: NativeStats): EngineStats {
  return {
    kvBlocksTotal: stats.kvBlocksTotal,
    kvBlocksMapped: stats.kvBlocksMapped,
    kvBlocksUsed: stats.kvBlocksUsed,
    kvBlockSize: stats.kvBlockSize,
    kvCacheBytes: stats.kvCacheBytes,
    kvCacheResidentBytes: stats.kvCacheResidentBytes,
    stateSlotsTotal: stats.stateSlotsTotal,
    stateSlotsMapped: stats.stateSlotsMapped,
    stateSlotsHeld: stats.stateSlotsHeld,
    requestsWaiting: stats.requestsWaiting,
    requestsRunning: stats.requestsRunning,
    requestsPaused: stats.requestsPaused,
    steps: stats.steps,
    tokensGenerated: stats.tokensGenerated,
    preemptions: stats.preemptions,
    prefixCacheQueries: stats.prefixCacheQueries,
    prefixCacheQueryTokens: stats.prefixCacheQueryTokens,
    prefixCacheHitTokens: stats.prefixCacheHitTokens,
    prefixCacheBlocks: stats.prefixCacheBlocks,
    prefixCacheEvictions: stats.prefixCacheEvictions,
  };
}

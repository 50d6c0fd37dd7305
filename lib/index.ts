/**
 * vtengine: run LLMs inside Node.js. Load a Hugging Face checkpoint folder with {@link Engine.load}, then
 * {@link Engine.generate} and stream the tokens of a {@link Generation}.
 *
 * @example
 * ```ts
 * import { Engine } from 'vtengine';
 *
 * await using engine = await Engine.load('./models/Qwen3-0.6B');
 * const gen = engine.generate({ tokens: [151644, 872, 198] }, { maxTokens: 32 });
 * for await (const chunk of gen) console.log(chunk.tokenIds);
 * console.log((await gen).finishReason);
 * ```
 * @module
 */
export { Engine } from './engine/engine.js';
export { DEFAULT_MODEL_DIR } from './engine/default-model.js';
export type { CudaGraphsOptions, DeviceOption, LoadOptions, LoadProgress } from './engine/load-options.js';
export type { EngineStats, ModelInfo } from './engine/model-info.js';
export type { ScoreResult } from './engine/score.js';
export type { GpuInfo, SystemInfo } from './engine/system-info.js';
export { MemoryTracker } from './memory/tracker.js';
export type {
  EngineMemory,
  GpuDeviceMemory,
  GpuMemory,
  MemoryComponent,
  MemoryEstimate,
  MemoryPeaks,
  MemorySample,
  MemoryReasons,
  MemorySnapshot,
  MemoryTier,
  PeakTimes,
  ProcessMemory,
  SystemMemory,
  TrackMemoryOptions,
} from './memory/types.js';
export type { GenerationDefaults } from './generation/defaults.js';
export { Generation, type GenerationEvents } from './generation/generation.js';
export type { GenerateInput, GenerateOptions, MessagesInput, PromptInput, TokensInput } from './generation/options.js';
export type { ChatMessage, ChatTemplateOptions } from './chat/template.js';
export type { DetokenizeOptions, TokenizeOptions } from './tokenizer/tokenizer.js';
export type {
  FinishReason,
  GenerationChunk,
  GenerationResult,
  GenerationTimings,
  GenerationUsage,
  TokenLogprob,
  TopLogprob,
} from './generation/result.js';
export {
  AbortError,
  BadCheckpointError,
  ContextOverflowError,
  DisposedError,
  EngineError,
  InternalError,
  InvalidOptionError,
  MissingFileError,
  ModelNotFoundError,
  NoChatTemplateError,
  NoGpuError,
  NoTokenizerError,
  OutOfMemoryError,
  ShapeMismatchError,
  TruncatedCheckpointError,
  UnsupportedArchitectureError,
  UnsupportedDtypeError,
} from './errors.js';

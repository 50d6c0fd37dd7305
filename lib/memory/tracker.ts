/**
 * `engine.trackMemory()`: samples this process's PSS/RSS, its GPU bytes (NVML, on a CUDA engine) and the machine's
 * MemAvailable on a timer and keeps the peaks. Samples are read synchronously (two small procfs files, well under a
 * millisecond, and one NVML call) so that a sample is one instant and `stop()` can take the last one before it
 * returns.
 * @module
 */
import { functionOption, integerOption, optionsRecord, rejectUnknownKeys } from '../validation.js';
import { ENGINE_NVML_INDEX, type Nvml, nvml } from './nvml.js';
import { readProcessMemorySync, readSystemMemorySync } from './procfs.js';
import type { MemoryPeaks, MemoryReasons, MemorySample, TrackMemoryOptions } from './types.js';

type PeakKey = 'pss' | 'rss' | 'gpu' | 'drop';

const KNOWN_KEYS: readonly (keyof TrackMemoryOptions)[] = ['intervalMs', 'onSample'];

/** Validated tracker options. @internal */
export function validateTrackMemoryOptions(options: unknown): { intervalMs: number; onSample?: (s: MemorySample) => void } {
  const o = optionsRecord(options, 'trackMemory options');
  rejectUnknownKeys(o, KNOWN_KEYS, 'trackMemory');
  return {
    intervalMs: integerOption('intervalMs', o.intervalMs, 10, 3_600_000) ?? 100,
    onSample: functionOption<(s: MemorySample) => void>('onSample', o.onSample),
  };
}

/** Where a tracker's GPU figure comes from: nothing on the CPU backend. @internal */
export interface GpuSampler {
  /** This process's GPU bytes now, or null with why. */
  read(): { value: number | null; reason?: string };
}

/** The CPU backend's GPU sampler. @internal */
export const NO_GPU: GpuSampler = { read: () => ({ value: null, reason: 'the engine runs on the CPU' }) };

/** A CUDA engine's GPU sampler: this process's bytes on the engine's GPU, from NVML. @internal */
export function nvmlGpuSampler(source: Nvml = nvml, index = ENGINE_NVML_INDEX): GpuSampler {
  return { read: () => source.processBytes(index, process.pid) };
}

/**
 * Peaks of memory over a window. Create one with `engine.trackMemory()`; `stop()` ends the window and returns the
 * peaks. Its timer does not keep the process alive, and `engine.dispose()` stops it.
 *
 * @example
 * ```ts
 * const tracker = engine.trackMemory({ intervalMs: 100 });
 * await engine.generate({ prompt: 'Once upon a time' }, { maxTokens: 256 });
 * const peaks = tracker.stop();
 * console.log(`peak PSS ${(peaks.pssBytes! / 2 ** 20).toFixed(0)} MiB at ${peaks.at.pss} ms`);
 * ```
 */
export class MemoryTracker implements Disposable {
  /** Milliseconds between samples. */
  readonly intervalMs: number;
  readonly #onSample: ((s: MemorySample) => void) | undefined;
  readonly #gpu: GpuSampler;
  readonly #started = performance.now();
  readonly #timer: NodeJS.Timeout;
  readonly #reasons: MemoryReasons = {};
  #baseline: MemorySample | undefined;
  #samples = 0;
  readonly #peak: Record<PeakKey, number | null> = { pss: null, rss: null, gpu: null, drop: null };
  readonly #at: MemoryPeaks['at'] = { pss: null, rss: null, gpu: null, availableDrop: null };
  #result: MemoryPeaks | undefined;
  #failure: { error: unknown } | undefined;
  readonly #onStop: ((tracker: MemoryTracker) => void) | undefined;

  /** @internal Use `engine.trackMemory()`. */
  constructor(options: unknown, hooks: { gpu?: GpuSampler; onStop?: (tracker: MemoryTracker) => void } = {}) {
    const o = validateTrackMemoryOptions(options);
    this.intervalMs = o.intervalMs;
    this.#onSample = o.onSample;
    this.#gpu = hooks.gpu ?? NO_GPU;
    this.#onStop = hooks.onStop;
    this.#sample();
    if (this.#failure) throw this.#failure.error; // onSample threw on the baseline: no tracker
    this.#timer = setInterval(() => this.#sample(), this.intervalMs);
    this.#timer.unref(); // a tracker must never be why a process stays up
  }

  /** Whether {@link MemoryTracker.stop} has been called (or the engine disposed). */
  get stopped(): boolean {
    return this.#result !== undefined || this.#failure !== undefined;
  }

  /** Samples taken so far. */
  get samples(): number {
    return this.#samples;
  }

  /**
   * Takes a last sample, stops the timer and returns the peaks over the whole window. Later calls return the same
   * result.
   * @throws what `onSample` threw, if it did.
   */
  stop(): MemoryPeaks {
    if (!this.stopped) {
      clearInterval(this.#timer);
      this.#sample();
      if (!this.#failure) this.#result = this.#peaks();
      this.#onStop?.(this);
    }
    if (this.#failure) throw this.#failure.error;
    return this.#result!;
  }

  /** Same as {@link MemoryTracker.stop}, without the result, for `using tracker = engine.trackMemory()`. */
  [Symbol.dispose](): void {
    if (!this.stopped) this.stop();
  }

  /** @internal Stops without throwing (engine.dispose()). */
  _end(): void {
    try {
      this.stop();
    } catch {
      // the failure stays for the caller's own stop()
    }
  }

  #sample(): void {
    if (this.#failure) return;
    const proc = readProcessMemorySync();
    const sys = readSystemMemorySync();
    const gpu = this.#gpu.read();
    const s: MemorySample = {
      atMs: performance.now() - this.#started,
      pssBytes: proc.value?.pssBytes ?? null,
      rssBytes: proc.value?.rssBytes ?? null,
      gpuBytes: gpu.value,
      availableBytes: sys.value?.availableBytes ?? null,
    };
    if (proc.reason !== undefined) this.#reasons.process = proc.reason;
    if (sys.reason !== undefined) this.#reasons.system = sys.reason;
    if (gpu.reason !== undefined) this.#reasons.gpu = gpu.reason;
    this.#baseline ??= s;
    this.#samples++;
    const base = this.#baseline.availableBytes;
    const drop = s.availableBytes !== null && base !== null ? base - s.availableBytes : null;
    this.#raise('pss', 'pss', s.pssBytes, s.atMs);
    this.#raise('rss', 'rss', s.rssBytes, s.atMs);
    this.#raise('gpu', 'gpu', s.gpuBytes, s.atMs);
    this.#raise('drop', 'availableDrop', drop, s.atMs);
    if (this.#onSample) {
      try {
        this.#onSample(s);
      } catch (error) {
        this.#failure = { error };
        clearInterval(this.#timer);
        this.#onStop?.(this);
      }
    }
  }

  #raise(key: PeakKey, at: keyof MemoryPeaks['at'], value: number | null, atMs: number): void {
    if (value === null) return;
    const current = this.#peak[key];
    if (current === null || value > current) {
      this.#peak[key] = value;
      this.#at[at] = atMs;
    }
  }

  #peaks(): MemoryPeaks {
    return {
      pssBytes: this.#peak.pss,
      rssBytes: this.#peak.rss,
      gpuBytes: this.#peak.gpu,
      // The baseline itself is a sample, so the drop is never below 0.
      availableDropBytes: this.#peak.drop,
      at: { ...this.#at },
      baseline: this.#baseline!,
      samples: this.#samples,
      durationMs: performance.now() - this.#started,
      intervalMs: this.intervalMs,
      reasons: { ...this.#reasons },
    };
  }
}

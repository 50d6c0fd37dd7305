// MemoryTracker on its own (engine.trackMemory() builds one; test/golden/memory.test.ts checks that dispose stops
// it). The reference for "it sees a peak" is an allocation of known size made and freed inside the window.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';

import { InvalidOptionError } from '../../lib/errors.js';
import { MemoryTracker } from '../../lib/memory/tracker.js';
import type { MemorySample } from '../../lib/memory/types.js';

const MiB = 2 ** 20;

describe('MemoryTracker', () => {
  it('returns peaks that are the maxima of its samples, the baseline included', async () => {
    const samples: MemorySample[] = [];
    const tracker = new MemoryTracker({ intervalMs: 10, onSample: (s) => samples.push(s) });
    // Touch 192 MiB (every page written) while it samples, then drop it. Counted in samples, not milliseconds: a
    // loaded host may take far longer than the interval over each (and one begun before the allocation may end
    // after it, so two more are awaited each time).
    const moreSamples = async (n: number): Promise<void> => {
      for (const want = samples.length + n; samples.length < want; ) await sleep(5);
    };
    await moreSamples(1);
    let block: Buffer | undefined = Buffer.alloc(192 * MiB, 1);
    await moreSamples(2);
    block = undefined;
    void block;
    await moreSamples(2);
    const peaks = tracker.stop();

    expect(peaks.samples).toBe(samples.length);
    expect(peaks.samples).toBeGreaterThanOrEqual(4);
    expect(peaks.baseline).toStrictEqual(samples[0]);
    const max = (k: keyof MemorySample): number => Math.max(...samples.map((s) => s[k] as number));
    expect(peaks.pssBytes).toBe(max('pssBytes'));
    expect(peaks.rssBytes).toBe(max('rssBytes'));
    const base = samples[0]!.availableBytes!;
    expect(peaks.availableDropBytes).toBe(Math.max(...samples.map((s) => base - s.availableBytes!)));
    for (const s of samples) {
      expect(peaks.pssBytes).toBeGreaterThanOrEqual(s.pssBytes!);
      expect(peaks.rssBytes).toBeGreaterThanOrEqual(s.rssBytes!);
    }
    expect(peaks.availableDropBytes).toBeGreaterThanOrEqual(0);
    // The peak is when it was first reached: a sample at that time holds it.
    expect(samples.find((s) => s.atMs === peaks.at.pss)?.pssBytes).toBe(peaks.pssBytes);
    // The 192 MiB allocation shows in the peak RSS and PSS (the pages are private: PSS counts them whole).
    expect(peaks.rssBytes! - peaks.baseline.rssBytes!).toBeGreaterThan(0.9 * 192 * MiB);
    expect(peaks.pssBytes! - peaks.baseline.pssBytes!).toBeGreaterThan(0.9 * 192 * MiB);
    expect(peaks.gpuBytes).toBeNull();
    expect(peaks.at.gpu).toBeNull();
    expect(peaks.reasons.gpu).toMatch(/CPU/);
    expect(peaks.durationMs).toBeGreaterThanOrEqual(80);
    expect(peaks.durationMs).toBeGreaterThanOrEqual(samples.at(-1)!.atMs);
    expect(peaks.intervalMs).toBe(10);
  });

  it('stops once: later stop() calls return the same peaks, and no sample comes after', async () => {
    let n = 0;
    const tracker = new MemoryTracker({ intervalMs: 10, onSample: () => n++ });
    const first = tracker.stop();
    expect(tracker.stopped).toBe(true);
    await sleep(50);
    expect(n).toBe(2); // the baseline and the final sample
    expect(tracker.stop()).toBe(first);
    expect(tracker.samples).toBe(2);
  });

  it('does not keep the process alive: its timer is unreferenced', () => {
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const tracker = new MemoryTracker({ intervalMs: 10 });
    const during = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    tracker.stop();
    expect(during).toBe(before);
  });

  it('stops and rethrows from stop() when onSample throws', async () => {
    const boom = new Error('boom');
    let calls = 0;
    const tracker = new MemoryTracker({
      intervalMs: 10,
      onSample: () => {
        if (++calls === 2) throw boom;
      },
    });
    await sleep(60);
    expect(calls).toBe(2);
    expect(tracker.stopped).toBe(true);
    expect(() => tracker.stop()).toThrow(boom);
    expect(() => new MemoryTracker({ onSample: () => { throw boom; } })).toThrow(boom);
  });

  it('works with `using`', () => {
    let t: MemoryTracker;
    {
      using tracker = new MemoryTracker({ intervalMs: 1000 });
      t = tracker;
    }
    expect(t.stopped).toBe(true);
  });

  it.each([
    [{ intervalMs: 5 }, /"intervalMs".*10 to 3600000.*got 5/],
    [{ intervalMs: 1.5 }, /"intervalMs"/],
    [{ intervalMs: '100' }, /"intervalMs"/],
    [{ onSample: 1 }, /"onSample"/],
    [{ interval: 100 }, /Unknown trackMemory option "interval"/],
    [42, /trackMemory options must be an object/],
  ])('rejects bad options: %o', (options, message) => {
    expect(() => new MemoryTracker(options)).toThrow(InvalidOptionError);
    expect(() => new MemoryTracker(options)).toThrow(message);
  });
});

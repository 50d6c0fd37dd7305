// The public shape of the native memory report: tiers by backend, components that sum to the total, "not
// measurable" (-1) as null, and the gpu section of a CUDA report (with NVML faked). The live figures are checked
// against procfs in test/golden/memory.test.ts, and against a real GPU in test/gpu/golden-cuda.test.ts.
import { describe, expect, it } from 'vitest';

import type { Nvml } from '../../lib/memory/nvml.js';
import { takeSnapshot, toEngineMemory } from '../../lib/memory/snapshot.js';
import type { NativeMemory } from '../../lib/native/addon.js';

const report: NativeMemory = {
  weightDeviceBytes: 0,
  weightHostBytes: 1280,
  weightMappedBytes: 270_976,
  weightMappedResidentBytes: 274_432,
  kvCacheBytes: 2_097_152,
  kvCacheResidentBytes: 65_536,
  kvBlocksTotal: 256,
  kvBlocksMapped: 256,
  kvBlocksUsed: 3,
  kvBlockSize: 16,
  workspaceBytes: 1_700_352,
  graphsCount: 0,
  graphsBytes: 0,
  hostPinnedBytes: 0,
  stateSlotBytes: 0,
  weightSkippedBytes: 0,
  weightSkippedResidentBytes: 0,
  gpuDevice: -1,
  gpuTotalBytes: -1,
  gpuFreeBytes: -1,
  gpuUnifiedMemory: false,
  gpuName: '',
};

const GiB = 2 ** 30;
const cudaReport: NativeMemory = {
  ...report,
  weightDeviceBytes: 16 * GiB,
  weightHostBytes: 0,
  weightMappedBytes: 0,
  gpuDevice: 0,
  gpuTotalBytes: 143 * GiB,
  gpuFreeBytes: 100 * GiB,
  gpuName: 'NVIDIA H200',
};

/** An NVML reader that answers `answer` and records what it was asked. */
function fakeNvml(answer: ReturnType<Nvml['processBytes']>): Nvml & { asked: Array<[number, number]> } {
  const asked: Array<[number, number]> = [];
  return {
    asked,
    processBytes: (index, pid) => (asked.push([index, pid]), answer),
  };
}

describe('toEngineMemory', () => {
  it('on the CPU: weights mapped and host, KV pool and workspaces on the host', () => {
    const m = toEngineMemory(report, 'cpu');
    expect(m.components).toStrictEqual([
      { name: 'weights', tier: 'mapped', bytes: 270_976 },
      { name: 'weights', tier: 'host', bytes: 1280 },
      { name: 'kv_cache', tier: 'host', bytes: 2_097_152 },
      { name: 'workspace', tier: 'host', bytes: 1_700_352 },
    ]);
    expect(m.totalBytes).toBe(270_976 + 1280 + 2_097_152 + 1_700_352);
    expect(m.kvCache).toStrictEqual({
      bytes: 2_097_152,
      stateSlotBytes: 0,
      residentBytes: 65_536,
      blocksTotal: 256,
      blocksMapped: 256,
      blocksUsed: 3,
      blockSize: 16,
    });
    expect(m.weights).toStrictEqual({ deviceBytes: 0, hostBytes: 1280, mappedBytes: 270_976, mappedResidentBytes: 274_432, skippedBytes: 0, skippedResidentBytes: 0 });
    expect(m.graphs).toStrictEqual({ count: 0, bytes: 0 });
  });

  it('on CUDA: device weights, KV pool, workspaces and graphs on the device; -1 becomes null', () => {
    const m = toEngineMemory(
      { ...report, weightDeviceBytes: 1000, weightMappedBytes: 0, kvCacheResidentBytes: -1, graphsCount: 7, graphsBytes: -1 },
      'cuda',
    );
    expect(m.components.map((c) => `${c.name}/${c.tier}`)).toStrictEqual(['weights/device', 'weights/host', 'kv_cache/device', 'workspace/device']);
    expect(m.kvCache.residentBytes).toBeNull();
    expect(m.graphs).toStrictEqual({ count: 7, bytes: null });
    expect(m.totalBytes).toBe(m.components.reduce((s, c) => s + c.bytes, 0));
    const withGraphs = toEngineMemory({ ...report, weightDeviceBytes: 1000, graphsCount: 7, graphsBytes: 4096 }, 'cuda');
    expect(withGraphs.components.at(-1)).toStrictEqual({ name: 'cuda_graphs', tier: 'device', bytes: 4096 });
    expect(withGraphs.pinnedHostBytes).toBe(0);
  });

  it('on CUDA: the pinned staging is host memory, a component of its own, in the total', () => {
    const pinned = 5_767_168;
    const m = toEngineMemory({ ...report, weightDeviceBytes: 1000, weightMappedBytes: 0, hostPinnedBytes: pinned }, 'cuda');
    expect(m.pinnedHostBytes).toBe(pinned);
    expect(m.components.at(-1)).toStrictEqual({ name: 'pinned_staging', tier: 'host', bytes: pinned });
    // (the KV pool counts what it has mapped: its resident bytes)
    expect(m.totalBytes).toBe(1000 + 1280 + 65_536 + 1_700_352 + pinned);
  });

  it('on CUDA: a pool that grows counts its mapped chunks, and reports its ceiling and mapped blocks apart', () => {
    // A ceiling of 60 GiB (what was free at load), 1 GiB of it mapped: 4096 of 245_760 blocks.
    const m = toEngineMemory(
      {
        ...report,
        weightDeviceBytes: 1000,
        weightMappedBytes: 0,
        kvCacheBytes: 60 * GiB,
        kvCacheResidentBytes: GiB,
        kvBlocksTotal: 245_760,
        kvBlocksMapped: 4096,
        kvBlocksUsed: 1500,
      },
      'cuda',
    );
    expect(m.components.find((c) => c.name === 'kv_cache')).toStrictEqual({ name: 'kv_cache', tier: 'device', bytes: GiB });
    expect(m.kvCache).toStrictEqual({
      bytes: 60 * GiB,
      stateSlotBytes: 0,
      residentBytes: GiB,
      blocksTotal: 245_760,
      blocksMapped: 4096,
      blocksUsed: 1500,
      blockSize: 16,
    });
    expect(m.totalBytes).toBe(1000 + 1280 + GiB + 1_700_352);
  });
});

describe('takeSnapshot: the gpu section', () => {
  it('on CUDA: the driver figures, this process from NVML (device 0, this pid), no gpu reason', async () => {
    const source = fakeNvml({ value: 20 * GiB });
    const snap = await takeSnapshot(cudaReport, 'cuda', source);
    expect(snap.gpu).toStrictEqual({
      devices: [
        { index: 0, name: 'NVIDIA H200', totalBytes: 143 * GiB, freeBytes: 100 * GiB, processBytes: 20 * GiB, unifiedMemory: false },
      ],
    });
    expect(source.asked).toStrictEqual([[0, process.pid]]);
    expect(snap.reasons.gpu).toBeUndefined();
    expect(snap.engine.weights.deviceBytes).toBe(16 * GiB);
  });

  it('NVML without an answer: processBytes null, the reason beside it and in reasons.gpu', async () => {
    const reason = "NVML: this process's GPU memory is not available (unified memory?)";
    const snap = await takeSnapshot({ ...cudaReport, gpuUnifiedMemory: true, gpuName: 'NVIDIA GB10' }, 'cuda', fakeNvml({ value: null, reason }));
    const d = snap.gpu!.devices[0]!;
    expect(d.processBytes).toBeNull();
    expect(d.processBytesReason).toBe(reason);
    expect(d.unifiedMemory).toBe(true);
    expect(snap.reasons.gpu).toBe(reason);
  });

  it('a driver that did not answer (free -1): freeBytes null, with the reason', async () => {
    const snap = await takeSnapshot({ ...cudaReport, gpuFreeBytes: -1 }, 'cuda', fakeNvml({ value: 1 }));
    expect(snap.gpu!.devices[0]!.freeBytes).toBeNull();
    expect(snap.gpu!.devices[0]!.totalBytes).toBe(143 * GiB);
    expect(snap.reasons.gpu).toMatch(/CUDA driver did not say/);
  });

  it('on the CPU: no gpu key and NVML not asked', async () => {
    const source = fakeNvml({ value: 1 });
    const snap = await takeSnapshot(report, 'cpu', source);
    expect('gpu' in snap).toBe(false);
    expect(snap.reasons.gpu).toBeUndefined();
    expect(source.asked).toStrictEqual([]);
  });
});

// The public shape of the native memory report: tiers by backend, components that sum to the total, and "not
// measurable" (-1) as null. The live figures are checked against procfs in test/golden/memory.test.ts.
import { describe, expect, it } from 'vitest';

import { toEngineMemory } from '../../lib/memory/snapshot.js';
import type { NativeMemory } from '../../lib/native/addon.js';

const report: NativeMemory = {
  weightDeviceBytes: 0,
  weightHostBytes: 1280,
  weightMappedBytes: 270_976,
  weightMappedResidentBytes: 274_432,
  kvCacheBytes: 2_097_152,
  kvCacheResidentBytes: 65_536,
  kvBlocksTotal: 256,
  kvBlocksUsed: 3,
  kvBlockSize: 16,
  workspaceBytes: 1_700_352,
  graphsCount: 0,
  graphsBytes: 0,
};

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
    expect(m.kvCache).toStrictEqual({ bytes: 2_097_152, residentBytes: 65_536, blocksTotal: 256, blocksUsed: 3, blockSize: 16 });
    expect(m.weights).toStrictEqual({ deviceBytes: 0, hostBytes: 1280, mappedBytes: 270_976, mappedResidentBytes: 274_432 });
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
  });
});

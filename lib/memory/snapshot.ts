/**
 * `engine.memory()`: the engine's own accounting (native) next to what the kernel says about the process and the
 * machine (procfs).
 * @internal
 * @module
 */
import type { NativeMemory } from '../native/addon.js';
import { readProcessMemory, readSystemMemory } from './procfs.js';
import type { EngineMemory, MemoryComponent, MemorySnapshot, MemoryTier } from './types.js';

/** The public shape of the native report. @internal */
export function toEngineMemory(m: NativeMemory, device: 'cpu' | 'cuda'): EngineMemory {
  // On the CPU backend the KV pool and the workspaces are host memory; the CUDA backend puts them on the device.
  const runtime: MemoryTier = device === 'cuda' ? 'device' : 'host';
  const candidates: MemoryComponent[] = [
    { name: 'weights', tier: 'device', bytes: m.weightDeviceBytes },
    { name: 'weights', tier: 'mapped', bytes: m.weightMappedBytes },
    { name: 'weights', tier: 'host', bytes: m.weightHostBytes },
    { name: 'kv_cache', tier: runtime, bytes: m.kvCacheBytes },
    { name: 'workspace', tier: runtime, bytes: m.workspaceBytes },
    { name: 'cuda_graphs', tier: 'device', bytes: m.graphsBytes > 0 ? m.graphsBytes : 0 },
  ];
  // Zero entries say nothing (no device weights on the CPU, no graphs).
  const components = candidates.filter((c) => c.bytes > 0);
  return {
    weights: {
      deviceBytes: m.weightDeviceBytes,
      hostBytes: m.weightHostBytes,
      mappedBytes: m.weightMappedBytes,
      mappedResidentBytes: m.weightMappedResidentBytes,
    },
    kvCache: {
      bytes: m.kvCacheBytes,
      residentBytes: m.kvCacheResidentBytes >= 0 ? m.kvCacheResidentBytes : null,
      blocksTotal: m.kvBlocksTotal,
      blocksUsed: m.kvBlocksUsed,
      blockSize: m.kvBlockSize,
    },
    graphs: { count: m.graphsCount, bytes: m.graphsBytes >= 0 ? m.graphsBytes : null },
    workspaceBytes: m.workspaceBytes,
    components,
    totalBytes: components.reduce((sum, c) => sum + c.bytes, 0),
  };
}

/** Assembles a snapshot; the native report is taken first, then procfs is read off the JS thread. @internal */
export async function takeSnapshot(native: NativeMemory, device: 'cpu' | 'cuda'): Promise<MemorySnapshot> {
  const takenAt = Date.now();
  const engine = toEngineMemory(native, device);
  const [proc, sys] = await Promise.all([readProcessMemory(), readSystemMemory()]);
  const reasons: MemorySnapshot['reasons'] = {};
  if (proc.reason !== undefined) reasons.process = proc.reason;
  if (sys.reason !== undefined) reasons.system = sys.reason;
  // gpu is left out on the CPU backend; the CUDA backend will fill it (driver totals, NVML per process).
  return { takenAt, process: proc.value, system: sys.value, engine, reasons };
}

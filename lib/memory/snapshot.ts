/**
 * `engine.memory()`: the engine's own accounting (native) next to what the kernel says about the process and the
 * machine (procfs) and, on a CUDA engine, what the driver and NVML say about the GPU.
 * @internal
 * @module
 */
import type { NativeMemory } from '../native/addon.js';
import { ENGINE_NVML_INDEX, type Nvml, nvml } from './nvml.js';
import { type Reading, readProcessMemory, readSystemMemory } from './procfs.js';
import type { EngineMemory, GpuMemory, MemoryComponent, MemorySnapshot, MemoryTier } from './types.js';

/** The public shape of the native report. @internal */
export function toEngineMemory(m: NativeMemory, device: 'cpu' | 'cuda'): EngineMemory {
  // On the CPU backend the KV pool and the workspaces are host memory; the CUDA backend puts them on the device.
  const runtime: MemoryTier = device === 'cuda' ? 'device' : 'host';
  const candidates: MemoryComponent[] = [
    { name: 'weights', tier: 'device', bytes: m.weightDeviceBytes },
    { name: 'weights', tier: 'mapped', bytes: m.weightMappedBytes },
    { name: 'weights', tier: 'host', bytes: m.weightHostBytes },
    // On the GPU the pool's ceiling is address space: it holds the chunks it has mapped.
    { name: 'kv_cache', tier: runtime, bytes: device === 'cuda' && m.kvCacheResidentBytes >= 0 ? m.kvCacheResidentBytes : m.kvCacheBytes },
    { name: 'workspace', tier: runtime, bytes: m.workspaceBytes },
    { name: 'cuda_graphs', tier: 'device', bytes: m.graphsBytes > 0 ? m.graphsBytes : 0 },
    { name: 'pinned_staging', tier: 'host', bytes: m.hostPinnedBytes },
  ];
  // Zero entries say nothing (no device weights on the CPU, no graphs).
  const components = candidates.filter((c) => c.bytes > 0);
  return {
    weights: {
      deviceBytes: m.weightDeviceBytes,
      hostBytes: m.weightHostBytes,
      mappedBytes: m.weightMappedBytes,
      mappedResidentBytes: m.weightMappedResidentBytes,
      skippedBytes: m.weightSkippedBytes,
      skippedResidentBytes: m.weightSkippedResidentBytes,
    },
    kvCache: {
      bytes: m.kvCacheBytes,
      stateSlotBytes: m.stateSlotBytes,
      residentBytes: m.kvCacheResidentBytes >= 0 ? m.kvCacheResidentBytes : null,
      blocksTotal: m.kvBlocksTotal,
      blocksMapped: m.kvBlocksMapped,
      blocksUsed: m.kvBlocksUsed,
      blockSize: m.kvBlockSize,
    },
    graphs: { count: m.graphsCount, bytes: m.graphsBytes >= 0 ? m.graphsBytes : null },
    workspaceBytes: m.workspaceBytes,
    pinnedHostBytes: m.hostPinnedBytes,
    components,
    totalBytes: components.reduce((sum, c) => sum + c.bytes, 0),
  };
}

/**
 * The GPU section of a report that has one (gpuDevice >= 0), with this process's bytes as NVML gave them, and why
 * any figure is null. @internal
 */
export function toGpuMemory(m: NativeMemory, processBytes: Reading<number>): { gpu: GpuMemory; reason?: string } {
  const why: string[] = [];
  if (processBytes.reason !== undefined) why.push(processBytes.reason);
  // -1: cuMemGetInfo failed, as it does once a failed kernel has left the context unusable.
  if (m.gpuFreeBytes < 0) why.push(`the CUDA driver did not say how much of GPU ${m.gpuDevice}'s memory is free`);
  const device: GpuMemory['devices'][number] = {
    index: m.gpuDevice,
    name: m.gpuName,
    totalBytes: m.gpuTotalBytes,
    freeBytes: m.gpuFreeBytes >= 0 ? m.gpuFreeBytes : null,
    processBytes: processBytes.value,
    unifiedMemory: m.gpuUnifiedMemory,
  };
  if (processBytes.reason !== undefined) device.processBytesReason = processBytes.reason;
  return why.length ? { gpu: { devices: [device] }, reason: why.join('; ') } : { gpu: { devices: [device] } };
}

/**
 * Assembles a snapshot: the native report (with the driver's GPU figures) first, then NVML, then procfs off the JS
 * thread. `gpuSource` is for tests. @internal
 */
export async function takeSnapshot(native: NativeMemory, device: 'cpu' | 'cuda', gpuSource: Nvml = nvml): Promise<MemorySnapshot> {
  const takenAt = Date.now();
  const engine = toEngineMemory(native, device);
  // The engine's GPU is CUDA ordinal 0, which is NVML's device ENGINE_NVML_INDEX for now (see there).
  const gpu = native.gpuDevice >= 0 ? toGpuMemory(native, gpuSource.processBytes(ENGINE_NVML_INDEX, process.pid)) : undefined;
  const [proc, sys] = await Promise.all([readProcessMemory(), readSystemMemory()]);
  const reasons: MemorySnapshot['reasons'] = {};
  if (proc.reason !== undefined) reasons.process = proc.reason;
  if (sys.reason !== undefined) reasons.system = sys.reason;
  if (gpu?.reason !== undefined) reasons.gpu = gpu.reason;
  // No gpu key at all on the CPU backend (not gpu: undefined): `'gpu' in snapshot` says whether a GPU is in use.
  const snapshot: MemorySnapshot = { takenAt, process: proc.value, system: sys.value, engine, reasons };
  if (gpu) snapshot.gpu = gpu.gpu;
  return snapshot;
}

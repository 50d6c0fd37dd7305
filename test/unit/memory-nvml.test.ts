// NVML through koffi (lib/memory/nvml.ts): every failure is null with a reason, never an exception. Three layers:
// the library absent (as on this machine and CI), fake NVML functions for the parsing and the error paths, and a
// fake libnvidia-ml built here from test/helpers/fake_nvml.c so the real koffi binding runs end to end (skipped
// without a C compiler). The real NVML answers on the GPU machine (test/gpu/golden-cuda.test.ts).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';

import {
  NVML_ERROR_INSUFFICIENT_SIZE,
  NVML_VALUE_NOT_AVAILABLE,
  type NvmlFunctions,
  PROCESS_INFO_BYTES,
  createNvml,
  koffiLoader,
  nvml,
  parseProcessInfos,
} from '../../lib/memory/nvml.js';
import { MemoryTracker, nvmlGpuSampler } from '../../lib/memory/tracker.js';

const PID = process.pid;

/** nvmlProcessInfo_t records as the library writes them (little-endian: x64 and arm64 Linux). */
function records(entries: Array<{ pid: number; bytes: bigint }>, capacity = entries.length): Buffer {
  const buf = Buffer.alloc(capacity * PROCESS_INFO_BYTES);
  entries.forEach((e, i) => {
    buf.writeUInt32LE(e.pid, i * PROCESS_INFO_BYTES);
    buf.writeBigUInt64LE(e.bytes, i * PROCESS_INFO_BYTES + 8);
    buf.writeUInt32LE(0xffffffff, i * PROCESS_INFO_BYTES + 16);
    buf.writeUInt32LE(0xffffffff, i * PROCESS_INFO_BYTES + 20);
  });
  return buf;
}

/** Fake NVML functions over a process list; `status` overrides what each call returns. */
function fake(list: () => Array<{ pid: number; bytes: bigint }>, status: Partial<Record<keyof NvmlFunctions, number>> = {}) {
  const calls = { init: 0, deviceByIndex: 0, computeProcesses: 0 };
  const fns: NvmlFunctions = {
    init: () => (calls.init++, status.init ?? 0),
    deviceByIndex: (index, out) => {
      calls.deviceByIndex++;
      out[0] = { device: index };
      return status.deviceByIndex ?? 0;
    },
    computeProcesses: (device, count, infos) => {
      calls.computeProcesses++;
      if (status.computeProcesses) return status.computeProcesses;
      expect(device).toStrictEqual({ device: 0 });
      const entries = list();
      if (count[0] < entries.length) {
        count[0] = entries.length;
        return NVML_ERROR_INSUFFICIENT_SIZE;
      }
      expect(infos.length).toBeGreaterThanOrEqual(count[0] * PROCESS_INFO_BYTES);
      records(entries).copy(infos);
      count[0] = entries.length;
      return 0;
    },
    errorString: (s) => ({ 4: 'Insufficient Permissions', 9: 'Driver Not Loaded', 999: 'Unknown Error' })[s] ?? '?',
  };
  return { fns, calls };
}

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('NVML absent', () => {
  it('a library that does not load is null with the reason, from the first call on, without throwing', () => {
    const reader = createNvml(koffiLoader('libnvidia-ml-absent.so.1'));
    const r = reader.processBytes(0, PID);
    expect(r.value).toBeNull();
    expect(r.reason).toMatch(/^NVML is not available: libnvidia-ml-absent\.so\.1 could not be loaded \(.+\); it comes with the NVIDIA driver$/);
    expect(reader.processBytes(0, PID)).toStrictEqual(r);
  });

  it("the process's reader answers here too (null and why where there is no NVIDIA driver)", () => {
    const r = nvml.processBytes(0, PID);
    if (r.value === null) expect(r.reason).toMatch(/NVML/);
    else expect(r.value).toBeGreaterThan(0);
  });

  it('available() says why too, with the same reason processBytes gives', () => {
    const reader = createNvml(koffiLoader('libnvidia-ml-absent.so.1'));
    const a = reader.available();
    expect(a.value).toBeNull();
    expect(a.reason).toBe(reader.processBytes(0, PID).reason);
  });

  it('a loader that throws (no koffi, a missing symbol) is a reason, asked once', () => {
    let loads = 0;
    const reader = createNvml(() => {
      loads++;
      throw new Error('libnvidia-ml.so.1 has no nvmlDeviceGetComputeRunningProcesses_v3');
    });
    expect(reader.processBytes(0, PID)).toStrictEqual({
      value: null,
      reason: 'NVML is not available: libnvidia-ml.so.1 has no nvmlDeviceGetComputeRunningProcesses_v3',
    });
    reader.processBytes(0, PID);
    expect(loads).toBe(1);
  });
});

describe('NVML answers (fake functions)', () => {
  it("this process's bytes: its own entry, other pids ignored; the library is set up once", () => {
    const { fns, calls } = fake(() => [
      { pid: 1, bytes: 7n },
      { pid: PID, bytes: 6_000_000_000n },
      { pid: PID + 1, bytes: 9n },
    ]);
    let loads = 0;
    const reader = createNvml(() => (loads++, fns));
    expect(reader.processBytes(0, PID)).toStrictEqual({ value: 6_000_000_000 });
    expect(reader.processBytes(0, PID)).toStrictEqual({ value: 6_000_000_000 });
    expect(reader.available()).toStrictEqual({ value: true });
    expect(loads).toBe(1);
    expect(calls.init).toBe(1);
    expect(calls.deviceByIndex).toBe(1); // the handle is kept
    expect(calls.computeProcesses).toBe(2); // the list is read at every call
  });

  it('sums several entries of this pid (MIG lists a process once per GPU instance)', () => {
    const { fns } = fake(() => [
      { pid: PID, bytes: 100n },
      { pid: PID, bytes: 23n },
    ]);
    expect(createNvml(() => fns).processBytes(0, PID)).toStrictEqual({ value: 123 });
  });

  it('NVML_VALUE_NOT_AVAILABLE (unified memory) is null with the reason', () => {
    const { fns } = fake(() => [{ pid: PID, bytes: NVML_VALUE_NOT_AVAILABLE }]);
    const r = createNvml(() => fns).processBytes(0, PID);
    expect(r.value).toBeNull();
    expect(r.reason).toMatch(/not available \(unified memory\?\)/);
  });

  it('no entry with this pid (a container shows host pids) is null with the reason', () => {
    vi.stubEnv('CUDA_VISIBLE_DEVICES', '');
    const { fns } = fake(() => [{ pid: 1, bytes: 10n }]);
    const r = createNvml(() => fns).processBytes(0, PID);
    expect(r.value).toBeNull();
    expect(r.reason).toBe(
      `NVML lists 1 compute process(es) on GPU 0, none with this process's pid ${PID} (inside a container NVML may report the host's pids)`,
    );
    vi.stubEnv('CUDA_VISIBLE_DEVICES', '3');
    expect(createNvml(() => fns).processBytes(0, PID).reason).toMatch(/CUDA_VISIBLE_DEVICES=3 is set, so NVML device 0 may not be/);
  });

  it('grows the record buffer when NVML says it is too small', () => {
    const many = Array.from({ length: 40 }, (_, i) => ({ pid: 5000 + i, bytes: BigInt(i) }));
    many.push({ pid: PID, bytes: 4096n });
    const { fns, calls } = fake(() => many);
    const reader = createNvml(() => fns);
    expect(reader.processBytes(0, PID)).toStrictEqual({ value: 4096 });
    expect(calls.computeProcesses).toBe(2);
    expect(reader.processBytes(0, PID)).toStrictEqual({ value: 4096 }); // the capacity it grew to stays
    expect(calls.computeProcesses).toBe(3);
  });

  it('a list that keeps growing is a reason, not a loop', () => {
    let n = 0;
    const { fns } = fake(() => Array.from({ length: (n = 3 * n + 100) }, () => ({ pid: PID, bytes: 1n })));
    expect(createNvml(() => fns).processBytes(0, PID)).toStrictEqual({
      value: null,
      reason: "NVML: GPU 0's process list kept growing while it was read",
    });
  });

  it('error codes become reasons with nvmlErrorString and the code', () => {
    const init = createNvml(() => fake(() => [], { init: 9 }).fns).processBytes(0, PID);
    expect(init).toStrictEqual({ value: null, reason: 'NVML: nvmlInit_v2 failed: Driver Not Loaded (nvmlReturn_t 9)' });
    expect(createNvml(() => fake(() => [], { init: 9 }).fns).available()).toStrictEqual(init); // loads, but unusable
    const handle = createNvml(() => fake(() => [], { deviceByIndex: 999 }).fns).processBytes(0, PID);
    expect(handle).toStrictEqual({ value: null, reason: 'NVML: no handle for GPU 0: Unknown Error (nvmlReturn_t 999)' });
    const list = createNvml(() => fake(() => [], { computeProcesses: 4 }).fns).processBytes(0, PID);
    expect(list).toStrictEqual({
      value: null,
      reason: "NVML: listing GPU 0's processes failed: Insufficient Permissions (nvmlReturn_t 4)",
    });
  });

  it('a binding that throws mid-call is still an answer', () => {
    const { fns } = fake(() => []);
    fns.computeProcesses = () => {
      throw new TypeError('bad argument');
    };
    fns.errorString = () => {
      throw new Error('no');
    };
    expect(createNvml(() => fns).processBytes(0, PID)).toStrictEqual({ value: null, reason: 'NVML: bad argument' });
  });

  it('parses only whole records, at most count', () => {
    const buf = records([
      { pid: 11, bytes: 2n ** 40n },
      { pid: 12, bytes: NVML_VALUE_NOT_AVAILABLE },
    ]);
    expect(parseProcessInfos(buf, 2)).toStrictEqual([
      { pid: 11, usedGpuMemory: 2n ** 40n },
      { pid: 12, usedGpuMemory: NVML_VALUE_NOT_AVAILABLE },
    ]);
    expect(parseProcessInfos(buf, 1)).toHaveLength(1);
    expect(parseProcessInfos(buf.subarray(0, 30), 2)).toHaveLength(1);
  });

  it("a CUDA engine's tracker keeps the peak of NVML's figure", () => {
    let bytes = 1000n;
    const { fns } = fake(() => [{ pid: PID, bytes: (bytes += 1000n) }]);
    const tracker = new MemoryTracker({ intervalMs: 10 }, { gpu: nvmlGpuSampler(createNvml(() => fns)) });
    const peaks = tracker.stop();
    expect(peaks.samples).toBe(2);
    expect(peaks.baseline.gpuBytes).toBe(2000);
    expect(peaks.gpuBytes).toBe(3000);
    expect(peaks.at.gpu).not.toBeNull();
    expect(peaks.reasons.gpu).toBeUndefined();
  });

  it("a CUDA engine's tracker without NVML: null peak and the reason", () => {
    const tracker = new MemoryTracker({ intervalMs: 10 }, { gpu: nvmlGpuSampler(createNvml(koffiLoader('libnvidia-ml-absent.so.1'))) });
    const peaks = tracker.stop();
    expect(peaks.gpuBytes).toBeNull();
    expect(peaks.reasons.gpu).toMatch(/^NVML is not available/);
  });
});

// The real koffi binding against a fake libnvidia-ml built now.
const cc = process.env.CC ?? 'cc';
const hasCc = spawnSync(cc, ['--version']).status === 0;
const dir = mkdtempSync(join(tmpdir(), 'vt-fake-nvml-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!hasCc)('koffi binding (fake libnvidia-ml.so)', () => {
  const lib = join(dir, 'libfake-nvml.so');
  const src = fileURLToPath(new URL('../helpers/fake_nvml.c', import.meta.url));
  const built = hasCc ? spawnSync(cc, ['-shared', '-fPIC', '-O1', '-o', lib, src], { encoding: 'utf8' }) : undefined;

  it('builds', () => {
    expect(built?.stderr).toBe('');
    expect(built?.status).toBe(0);
  });

  it("reads this process's bytes, above 2^32, through the handle and the record buffer", () => {
    vi.stubEnv('FAKE_NVML_COUNT', '3');
    vi.stubEnv('FAKE_NVML_BYTES', '5000000000');
    expect(createNvml(koffiLoader(lib)).processBytes(0, PID)).toStrictEqual({ value: 5_000_000_000 });
  });

  it('grows the buffer through the in/out count', () => {
    vi.stubEnv('FAKE_NVML_COUNT', '50');
    vi.stubEnv('FAKE_NVML_BYTES', '123456789');
    expect(createNvml(koffiLoader(lib)).processBytes(0, PID)).toStrictEqual({ value: 123_456_789 });
  });

  it('NVML_VALUE_NOT_AVAILABLE, an init failure and a bad index come back as reasons', () => {
    vi.stubEnv('FAKE_NVML_BYTES', 'na');
    expect(createNvml(koffiLoader(lib)).processBytes(0, PID).reason).toMatch(/not available \(unified memory\?\)/);
    expect(createNvml(koffiLoader(lib)).processBytes(1, PID)).toStrictEqual({
      value: null,
      reason: 'NVML: no handle for GPU 1: Invalid Argument (nvmlReturn_t 2)',
    });
    vi.stubEnv('FAKE_NVML_INIT', '9');
    expect(createNvml(koffiLoader(lib)).processBytes(0, PID)).toStrictEqual({
      value: null,
      reason: 'NVML: nvmlInit_v2 failed: Driver Not Loaded (nvmlReturn_t 9)',
    });
  });

  it('a library without the NVML symbols is a reason', () => {
    const r = createNvml(koffiLoader('libc.so.6')).processBytes(0, PID);
    expect(r.value).toBeNull();
    expect(r.reason).toMatch(/^NVML is not available: libc\.so\.6 has no nvmlInit_v2 \(an older NVIDIA driver\?\)/);
  });
});

/**
 * This process's GPU memory from NVML (`libnvidia-ml.so.1`, which comes with the NVIDIA driver), called through
 * koffi so that nothing links against the driver: a machine without it loads the SDK as usual and reports the
 * figure as null with the reason. Every answer is `{ value }` or `{ value: null, reason }`, never an exception.
 *
 * The NVML declarations used here were checked against NVIDIA's `nvml.h` (NVML_API_VERSION 13, as vendored in
 * NVIDIA/go-nvml `pkg/nvml/nvml.h`, 2026-07): `nvmlInit_v2(void)`, `nvmlDeviceGetHandleByIndex_v2(unsigned int,
 * nvmlDevice_t *)`, `nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned int *infoCount,
 * nvmlProcessInfo_t *infos)` (what `nvmlDeviceGetComputeRunningProcesses` maps onto), `const char
 * *nvmlErrorString(nvmlReturn_t)`; `nvmlProcessInfo_t` is `nvmlProcessInfo_v2_t` = { unsigned int pid; unsigned long
 * long usedGpuMemory; unsigned int gpuInstanceId; unsigned int computeInstanceId; }, 24 bytes with the padding after
 * pid on every LP64 ABI; `NVML_VALUE_NOT_AVAILABLE` is `(-1)`, all ones in the unsigned field.
 * @internal
 * @module
 */
import { createRequire } from 'node:module';
import { endianness } from 'node:os';

import type { Reading } from './procfs.js';

/** nvmlReturn_t values we act on (nvml.h). @internal */
export const NVML_SUCCESS = 0;
/** @internal */
export const NVML_ERROR_INSUFFICIENT_SIZE = 7;
/** sizeof(nvmlProcessInfo_t): pid at 0, usedGpuMemory at 8, gpuInstanceId at 16, computeInstanceId at 20. @internal */
export const PROCESS_INFO_BYTES = 24;
/** usedGpuMemory when the driver cannot say (Windows WDDM; unified-memory GPUs such as GB10). @internal */
export const NVML_VALUE_NOT_AVAILABLE = 0xffff_ffff_ffff_ffffn;

/**
 * The NVML index of the engine's GPU. The engine runs on CUDA ordinal 0, and for now this is NVML's device 0.
 * They are one GPU on a single-GPU machine; with several GPUs they can differ (NVML counts every GPU in PCI bus
 * order, CUDA counts the visible ones, fastest first, after CUDA_VISIBLE_DEVICES), and then this process is
 * missing from device 0's list and the figure is null with that reason. Matching the two by PCI bus id is the fix
 * once the engine runs on other GPUs. @internal
 */
export const ENGINE_NVML_INDEX = 0;

/**
 * NVML's functions as the C signatures above, with out-parameters as one-element arrays (koffi's convention). The
 * koffi loader binds them to the library; tests pass fakes. @internal
 */
export interface NvmlFunctions {
  /** nvmlInit_v2. */
  init(): number;
  /** nvmlDeviceGetHandleByIndex_v2: the handle goes to `device[0]`. */
  deviceByIndex(index: number, device: [unknown]): number;
  /**
   * nvmlDeviceGetComputeRunningProcesses_v3: `count[0]` in is the capacity of `infos` in nvmlProcessInfo_t
   * records, out the records written (or, with NVML_ERROR_INSUFFICIENT_SIZE, the records needed).
   */
  computeProcesses(device: unknown, count: [number], infos: Buffer): number;
  /** nvmlErrorString. */
  errorString(status: number): string;
}

/** Binds the functions; throws an Error saying why it cannot (no library, no symbol). @internal */
export type NvmlLoader = () => NvmlFunctions;

/** This process's bytes on a GPU, as NVML reports them. @internal */
export interface Nvml {
  /** Bytes that process `pid` holds on NVML device `index` now, or null with why. */
  processBytes(index: number, pid: number): Reading<number>;
}

/** An NVML reader that can also say whether NVML loads here at all (for `Engine.systemInfo()`). @internal */
export interface NvmlReader extends Nvml {
  /** `{ value: true }` when the library loaded and nvmlInit_v2 succeeded, else null with why. */
  available(): Reading<true>;
}

function why(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Binds NVML from the shared library at `path` through koffi, itself loaded only now. @internal */
export function koffiLoader(path = 'libnvidia-ml.so.1'): NvmlLoader {
  return () => {
    let koffi: typeof import('koffi');
    try {
      // Loaded here, not imported: koffi is a native addon, and the CPU backend must not depend on it loading.
      koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    } catch (err) {
      throw new Error(`the koffi package could not be loaded (${why(err)})`);
    }
    let lib: ReturnType<typeof koffi.load>;
    try {
      lib = koffi.load(path);
    } catch (err) {
      throw new Error(`${path} could not be loaded (${why(err)}); it comes with the NVIDIA driver`);
    }
    type Arg = Parameters<typeof koffi.out>[0] | ReturnType<typeof koffi.out>;
    const bind = (name: string, result: string, args: Arg[]) => {
      try {
        return lib.func(name, result, args);
      } catch (err) {
        throw new Error(`${path} has no ${name} (an older NVIDIA driver?): ${why(err)}`);
      }
    };
    const device = koffi.pointer(koffi.opaque()); // nvmlDevice_t, anonymous: a named type can be declared once only
    const init = bind('nvmlInit_v2', 'int', []);
    const byIndex = bind('nvmlDeviceGetHandleByIndex_v2', 'int', ['uint32_t', koffi.out(koffi.pointer(device))]);
    const processes = bind('nvmlDeviceGetComputeRunningProcesses_v3', 'int', [
      device,
      koffi.inout(koffi.pointer('uint32_t')),
      'void *', // the records, parsed by parseProcessInfos: one Buffer, no per-field marshalling
    ]);
    const errorString = bind('nvmlErrorString', 'const char *', ['int']);
    return {
      init: () => init() as number,
      deviceByIndex: (index, out) => byIndex(index, out) as number,
      computeProcesses: (dev, count, infos) => processes(dev, count, infos) as number,
      errorString: (status) => errorString(status) as string,
    };
  };
}

/** One nvmlProcessInfo_t. @internal */
export interface ProcessInfo {
  pid: number;
  /** NVML_VALUE_NOT_AVAILABLE when the driver cannot say. */
  usedGpuMemory: bigint;
}

/** The first `count` nvmlProcessInfo_t records of `buf` (native byte order, as the library wrote them). @internal */
export function parseProcessInfos(buf: Buffer, count: number): ProcessInfo[] {
  const le = endianness() === 'LE';
  const n = Math.min(count, Math.floor(buf.length / PROCESS_INFO_BYTES));
  const out: ProcessInfo[] = [];
  for (let i = 0; i < n; i++) {
    const at = i * PROCESS_INFO_BYTES;
    out.push({
      pid: le ? buf.readUInt32LE(at) : buf.readUInt32BE(at),
      usedGpuMemory: le ? buf.readBigUInt64LE(at + 8) : buf.readBigUInt64BE(at + 8),
    });
  }
  return out;
}

/**
 * `pid`'s bytes among the records: the sum of its entries (MIG can list a process once per GPU instance), null
 * when it has none (its pid is another namespace's, or it uses another GPU) or the driver cannot say. @internal
 */
export function bytesOfProcess(infos: ProcessInfo[], pid: number, index: number): Reading<number> {
  const mine = infos.filter((p) => p.pid === pid);
  if (mine.length === 0) {
    const cvd = process.env.CUDA_VISIBLE_DEVICES;
    const remap = cvd ? `; CUDA_VISIBLE_DEVICES=${cvd} is set, so NVML device ${index} may not be the engine's GPU` : '';
    return {
      value: null,
      reason:
        `NVML lists ${infos.length} compute process(es) on GPU ${index}, none with this process's pid ${pid} ` +
        `(inside a container NVML may report the host's pids)${remap}`,
    };
  }
  if (mine.some((p) => p.usedGpuMemory === NVML_VALUE_NOT_AVAILABLE)) {
    return { value: null, reason: "NVML: this process's GPU memory is not available (unified memory?)" };
  }
  return { value: Number(mine.reduce((sum, p) => sum + p.usedGpuMemory, 0n)) };
}

/**
 * An NVML reader over `load`, which runs on the first call only: the library and nvmlInit_v2 are tried once per
 * reader, and a failure is the answer from then on (nvmlInit_v2 is reference-counted and never undone: the reader
 * lives as long as the process). @internal
 */
export function createNvml(load: NvmlLoader): NvmlReader {
  let state: { fns: NvmlFunctions } | { reason: string } | undefined;
  const handles = new Map<number, unknown>();
  let capacity = 16; // records; grows to what the machine needs and stays there

  const describe = (fns: NvmlFunctions, status: number): string => {
    let text: string;
    try {
      text = fns.errorString(status);
    } catch {
      text = 'unknown error';
    }
    return `${text} (nvmlReturn_t ${status})`;
  };

  const ready = (): { fns: NvmlFunctions } | { reason: string } => {
    if (state) return state;
    try {
      const fns = load();
      const status = fns.init();
      state = status === NVML_SUCCESS ? { fns } : { reason: `NVML: nvmlInit_v2 failed: ${describe(fns, status)}` };
    } catch (err) {
      state = { reason: `NVML is not available: ${why(err)}` };
    }
    return state;
  };

  const handle = (fns: NvmlFunctions, index: number): { device: unknown } | { reason: string } => {
    if (handles.has(index)) return { device: handles.get(index) };
    const out: [unknown] = [null];
    const status = fns.deviceByIndex(index, out);
    if (status !== NVML_SUCCESS) return { reason: `NVML: no handle for GPU ${index}: ${describe(fns, status)}` };
    handles.set(index, out[0]);
    return { device: out[0] };
  };

  return {
    available() {
      const s = ready();
      return 'reason' in s ? { value: null, reason: s.reason } : { value: true };
    },
    processBytes(index, pid) {
      try {
        const s = ready();
        if ('reason' in s) return { value: null, reason: s.reason };
        const h = handle(s.fns, index);
        if ('reason' in h) return { value: null, reason: h.reason };
        // The list can grow between the call that sizes it and the one that fills it: retry a few times.
        for (let attempt = 0; attempt < 4; attempt++) {
          const infos = Buffer.alloc(capacity * PROCESS_INFO_BYTES);
          const count: [number] = [capacity];
          const status = s.fns.computeProcesses(h.device, count, infos);
          if (status === NVML_ERROR_INSUFFICIENT_SIZE) {
            capacity = Math.max(count[0] + 8, capacity * 2);
            continue;
          }
          if (status !== NVML_SUCCESS) {
            return { value: null, reason: `NVML: listing GPU ${index}'s processes failed: ${describe(s.fns, status)}` };
          }
          return bytesOfProcess(parseProcessInfos(infos, count[0]), pid, index);
        }
        return { value: null, reason: `NVML: GPU ${index}'s process list kept growing while it was read` };
      } catch (err) {
        return { value: null, reason: `NVML: ${why(err)}` }; // a binding that throws (koffi, a fake): still an answer
      }
    },
  };
}

/** The process's NVML reader: loads libnvidia-ml.so.1 on its first use. @internal */
export const nvml: NvmlReader = createNvml(koffiLoader());

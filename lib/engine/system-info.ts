/**
 * What {@link Engine.systemInfo} reports: this machine and this install, without a model. The native side
 * (vt_system_info_get) probes the CPU, reads the kernels embedded in the binary and asks the driver; this module adds
 * what only JavaScript knows (which binary node-gyp-build picked, whether NVML loads through koffi) and gives it
 * its public shape.
 * @module
 */
import type { AddonBinary } from '../native/addon-path.js';
import type { NativeGpuInfo, NativeSystemInfo } from '../native/addon.js';
import type { Reading } from '../memory/procfs.js';

/** One GPU as the NVIDIA driver lists it, and whether vtengine can run on it. */
export interface GpuInfo {
  /** CUDA ordinal (the engine runs on GPU 0). */
  index: number;
  /** e.g. `'NVIDIA H200'`. */
  name: string;
  /** e.g. `'9.0'`. */
  computeCapability: string;
  /** The GPU's architecture, e.g. `'sm_90'`. */
  arch: string;
  /** Device memory. */
  totalBytes: number;
  /** The GPU shares the host's memory (GB10, Jetson Thor). */
  integrated: boolean;
  /**
   * What the driver would run from this binary: `'cubin'` (code built for this architecture), `'ptx'` (compiled by
   * the driver at the first load: slow once, then cached) or `'none'`.
   */
  kernels: 'cubin' | 'ptx' | 'none';
  /** The embedded target it would run, e.g. `'sm_90a'` or `'compute_80'`; null with `kernels: 'none'`. */
  kernelTarget: string | null;
  /** The driver and this binary's kernels can run the engine on it. */
  usable: boolean;
  /** Why not, in words you can act on; null when usable. */
  reason: string | null;
}

/** The result of {@link Engine.systemInfo}. Everything missing is reported here, never thrown. */
export interface SystemInfo {
  /** vtengine's version. */
  version: string;
  /** The native binary this process loaded: a prebuild shipped in the package, or one compiled on this machine. */
  binary: {
    /** `'prebuild'`: shipped in the package's prebuilds/ folder; `'local build'`: compiled here (build/Release). */
    kind: 'prebuild' | 'local build';
    /** The file loaded (in an Electron app, under `app.asar.unpacked`). */
    path: string;
  };
  /** The JavaScript runtime. */
  runtime: {
    /** Node's version, e.g. `'20.19.0'`. */
    node: string;
    /** Electron's version when running in Electron, else null. */
    electron: string | null;
    /** `process.platform`, e.g. `'linux'`. */
    platform: string;
    /** `process.arch`, e.g. `'x64'`, `'arm64'`. */
    arch: string;
  };
  /** The CPU backend. */
  cpu: {
    /** `'x86_64'` or `'aarch64'`. */
    arch: string;
    /** The features vtengine checks that this CPU has, as /proc/cpuinfo names them (`'avx2'`, `'avx512_bf16'`). */
    features: string[];
    /** The features vtengine checks that this CPU lacks. */
    missingFeatures: string[];
    /** The SIMD path the matrix products take: `'avx512'`, `'avx2'`, `'neon'` or `'scalar'`. */
    matmul: string;
    /** The paths compiled into this binary. */
    matmulPaths: string[];
    /** Threads the CPU backend uses by default (`threads: 0`): the online cores. */
    threads: number;
  };
  /** The CUDA backend. */
  cuda: {
    /** The targets embedded in this binary, cubins (`'sm_90a'`) then PTX (`'compute_80'`); empty without kernels. */
    targets: string[];
    /** Why no GPU can run this binary's kernels (none embedded: built from source without nvcc, or with no GPU to build for); null otherwise. */
    kernelsProblem: string | null;
    /** The CUDA version a driver must support for these kernels, e.g. `'13.0'`. */
    minDriverVersion: string;
    /** The NVIDIA driver (libcuda.so.1). */
    driver: {
      /** libcuda.so.1 loaded. */
      found: boolean;
      /** The CUDA version it supports, e.g. `'13.0'`; null when not found. */
      version: string | null;
      /** Why it lists no GPU (not installed, no GPU visible...); null when it lists some. */
      problem: string | null;
    };
    /** Every GPU the driver lists; empty without a driver. */
    gpus: GpuInfo[];
    /**
     * The matrix products on GPU 0: the selection table the CUDA backend consults (measured per GPU family by
     * `bench/cuda-gemm.cpp`) and which kernel serves which number of rows; null without a usable GPU.
     */
    gemm: {
      /** The GPU family the table is for, e.g. `'hopper (sm_90a: wgmma + TMA, mma.sync)'`. */
      family: string;
      /** Where its rules were measured (GPU, date); null when this family was not measured (its rules are another family's). */
      measured: string | null;
      /** Which kernel serves which rows, e.g. `['1-8 rows: gemv', '9-16 rows: mma_m16n128, split-K to 2 blocks/SM', ...]`. */
      rules: string[];
    } | null;
    /**
     * cuBLASLt, found or not. The CUDA backend's own tensor-core GEMMs serve every product; cuBLASLt is loaded only
     * to compare with them (`VT_CUDA_GEMM=cublaslt`), so a machine without the CUDA toolkit runs at full speed.
     */
    cublasLt: {
      /** The library loaded. */
      found: boolean;
      /** e.g. `'13.1.0'`; null when not found. */
      version: string | null;
      /** The name or path it loaded from; null when not found. */
      path: string | null;
      /** Why not found (the names tried); null when found. */
      problem: string | null;
    };
    /** NVML, which the memory reports read this process's GPU bytes from. */
    nvml: {
      /** libnvidia-ml.so.1 loaded and initialized. */
      found: boolean;
      /** Why not; null when found. */
      problem: string | null;
    };
  };
  /** What `device: 'auto'` picks here, and why. */
  auto: {
    /** The backend an `Engine.load` with `device: 'auto'` (the default) would run on. */
    device: 'cuda' | 'cpu';
    /** The GPU and kernels it would take, or why CUDA cannot be used (what to fix first is named first). */
    reason: string;
  };
}

/** 13000 → "13.0" (cuDriverGetVersion's encoding). @internal */
export function cudaVersionText(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

/** 130100 → "13.1.0" (cublasLtGetVersion's encoding: major * 10000 + minor * 100 + patch). @internal */
function cublasVersionText(v: number): string {
  return `${Math.floor(v / 10000)}.${Math.floor((v % 10000) / 100)}.${v % 100}`;
}

const orNull = (s: string): string | null => (s === '' ? null : s);

function gpuInfo(g: NativeGpuInfo, index: number): GpuInfo {
  return {
    index,
    name: g.name,
    computeCapability: `${g.ccMajor}.${g.ccMinor}`,
    arch: `sm_${g.ccMajor}${g.ccMinor}`,
    totalBytes: g.totalBytes,
    integrated: g.integrated,
    kernels: g.code,
    kernelTarget: orNull(g.codeTarget),
    usable: g.usable,
    reason: orNull(g.reason),
  };
}

/** The public report from the native one and what JavaScript knows. @internal */
export function toSystemInfo(n: NativeSystemInfo, binary: AddonBinary, nvml: Reading<true>, version: string): SystemInfo {
  return {
    version,
    binary: { kind: binary.kind, path: binary.path },
    runtime: {
      node: process.versions.node,
      electron: process.versions.electron ?? null,
      platform: process.platform,
      arch: process.arch,
    },
    cpu: {
      arch: n.cpuArch,
      features: n.cpuFeatures,
      missingFeatures: n.cpuFeaturesAbsent,
      matmul: n.cpuMatmul,
      matmulPaths: n.cpuMatmulPaths,
      threads: n.cpuThreads,
    },
    cuda: {
      targets: n.cudaTargets,
      kernelsProblem: orNull(n.kernelsProblem),
      minDriverVersion: cudaVersionText(n.minDriverVersion),
      driver: {
        found: n.driverFound,
        version: n.driverVersion > 0 ? cudaVersionText(n.driverVersion) : null,
        problem: orNull(n.driverProblem),
      },
      gpus: n.gpus.map(gpuInfo),
      cublasLt: {
        found: n.cublasLtFound,
        version: n.cublasLtFound && n.cublasLtVersion > 0 ? cublasVersionText(n.cublasLtVersion) : null,
        path: orNull(n.cublasLtPath),
        problem: orNull(n.cublasLtProblem),
      },
      gemm: n.gemmFamily
        ? { family: n.gemmFamily, measured: orNull(n.gemmMeasured), rules: n.gemmRules.split('; ').filter(Boolean) }
        : null,
      nvml: { found: nvml.value === true, problem: nvml.value === true ? null : nvml.reason },
    },
    auto: { device: n.autoDevice, reason: n.autoReason },
  };
}

// Engine.systemInfo() on a GPU machine, against what the driver's own tools say: /proc/driver/nvidia (the kernel
// module) for whether there is a GPU at all, and nvidia-smi for each GPU's name, compute capability and memory.
// On the H200 a build with the release targets must report sm_90 with the embedded sm_90a cubin, usable, and
// device 'auto' must pick it. Skipped without an NVIDIA GPU (no /proc/driver/nvidia/gpus), which is what CI sees.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';

const GPU_DIR = '/proc/driver/nvidia/gpus';
const hasGpu = existsSync(GPU_DIR) && readdirSync(GPU_DIR).length > 0;

interface SmiGpu {
  name: string;
  computeCap: string;
  memoryMiB: number;
}

/** nvidia-smi's list, in CUDA's order only when no CUDA_VISIBLE_DEVICES reorders it; null when it cannot run. */
function nvidiaSmi(): SmiGpu[] | null {
  const r = spawnSync('nvidia-smi', ['--query-gpu=name,compute_cap,memory.total', '--format=csv,noheader,nounits'], {
    encoding: 'utf8',
  });
  if (r.status !== 0) return null;
  return r.stdout
    .trim()
    .split('\n')
    .map((line) => {
      const [name, computeCap, mem] = line.split(',').map((s) => s.trim());
      return { name, computeCap, memoryMiB: Number(mem) };
    });
}

describe.skipIf(!hasGpu)('Engine.systemInfo() on a GPU machine', () => {
  const info = Engine.systemInfo();

  it('finds the driver and lists every GPU as nvidia-smi does', () => {
    expect(info.cuda.driver.found).toBe(true);
    expect(info.cuda.driver.version).toMatch(/^\d+\.\d$/);
    expect(info.cuda.driver.problem).toBeNull();
    const smi = nvidiaSmi();
    if (!smi || process.env.CUDA_VISIBLE_DEVICES !== undefined) return;
    expect(info.cuda.gpus.map((g) => g.name)).toStrictEqual(smi.map((g) => g.name));
    info.cuda.gpus.forEach((g, i) => {
      expect(g.computeCapability).toBe(smi[i].computeCap);
      // nvidia-smi's total and cuDeviceTotalMem differ by what the driver reserves: within 2 %
      expect(Math.abs(g.totalBytes / 2 ** 20 - smi[i].memoryMiB) / smi[i].memoryMiB).toBeLessThan(0.02);
    });
  });

  it('matches each GPU to the embedded kernels, and auto picks GPU 0 exactly when it is usable', () => {
    for (const g of info.cuda.gpus) {
      if (info.cuda.targets.length === 0) {
        expect(g).toMatchObject({ kernels: 'none', usable: false, reason: expect.stringMatching(/no CUDA kernels/) });
      }
      if (g.kernels === 'none') expect(g.usable).toBe(false);
    }
    expect(info.auto.device).toBe(info.cuda.gpus[0]?.usable ? 'cuda' : 'cpu');
  });

  it('reports an H200 as sm_90 with the embedded sm_90a cubin (a build with the release targets)', (ctx) => {
    const h200 = info.cuda.gpus.find((g) => /H200/.test(g.name));
    if (!h200 || !info.cuda.targets.includes('sm_90a')) ctx.skip();
    expect(h200).toMatchObject({ computeCapability: '9.0', arch: 'sm_90', kernels: 'cubin', kernelTarget: 'sm_90a', usable: true, reason: null });
  });

  it('names the GEMM table GPU 0 runs: the Hopper one (wgmma) where the sm_90a cubin is what the driver loads', () => {
    const g0 = info.cuda.gpus[0];
    if (!g0?.usable) {
      expect(info.cuda.gemm).toBeNull();
      return;
    }
    const gemm = info.cuda.gemm!;
    expect(gemm.family).toMatch(g0.kernelTarget === 'sm_90a' ? /^hopper/ : /mma\.sync/);
    expect(gemm.rules[0]).toMatch(/^1(-\d+)? rows?: gemv$/);
    expect(gemm.rules.at(-1)).toMatch(/^\d+\+ rows: (mma|wgmma)_m\d+n\d+/);
  });

  it("loads on the device that systemInfo().auto names, with device: 'auto'", async () => {
    const engine = await Engine.load({ device: 'auto' });
    try {
      expect(engine.device).toBe(info.auto.device);
    } finally {
      await engine.dispose();
    }
  });
});

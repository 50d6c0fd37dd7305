// Engine.systemInfo() and `vtengine doctor`, held to references this project did not write: the kernel's
// /proc/cpuinfo for the CPU features, the dynamic loader's view (ldconfig, LD_LIBRARY_PATH) for whether an NVIDIA
// driver is installed, node-gyp-build's rule for the binary, and the header line scripts/build-cuda.mjs wrote into
// the kernel table for the CUDA targets. `vtengine doctor --json` must print the same object.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { Engine, type SystemInfo } from '../../lib/index.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(ROOT, 'dist/cli/main.js');
const INC = join(ROOT, 'cuda/src/backend/cuda/kernels_fatbin.inc');

const info: SystemInfo = Engine.systemInfo();

/** The CPU's feature flags as Linux lists them: "flags" on x86, "Features" on arm64. */
function procCpuFlags(): Set<string> {
  const text = readFileSync('/proc/cpuinfo', 'utf8');
  const line = text.split('\n').find((l) => /^(flags|Features)\s*:/.test(l)) ?? '';
  return new Set(line.slice(line.indexOf(':') + 1).trim().split(/\s+/));
}

/** Whether the dynamic loader could find libcuda.so.1 (its cache, or an LD_LIBRARY_PATH folder). */
function loaderFindsLibcuda(): boolean {
  const cache = spawnSync('/sbin/ldconfig', ['-p'], { encoding: 'utf8' });
  if (cache.status === 0 && /\blibcuda\.so\.1\b/.test(cache.stdout)) return true;
  const dirs = (process.env.LD_LIBRARY_PATH ?? '').split(':').filter(Boolean);
  return dirs.some((d) => existsSync(join(d, 'libcuda.so.1')));
}

/** The targets scripts/build-cuda.mjs says it embedded: "(nvcc 13.0, sm_80 sm_90a + compute_80 PTX)" → list. */
function targetsFromIncHeader(): string[] {
  if (!existsSync(INC)) return []; // never generated: kernels_fatbin.cpp compiles an empty table
  const first = readFileSync(INC, 'utf8').split('\n', 1)[0];
  const m = /\(nvcc [^,]+, ([^)]*)\)/.exec(first);
  if (!m) return []; // "(--no-cuda: no kernels)", "(nvcc not found ...: no kernels)"
  const [cubins, ptx] = m[1].split(' + ');
  return [...cubins.split(' '), ...(ptx ? [ptx.replace(/ PTX$/, '')] : [])];
}

describe('Engine.systemInfo() on this machine', () => {
  it('lists the CPU features vtengine checks exactly as /proc/cpuinfo does', () => {
    const flags = procCpuFlags();
    expect(info.cpu.features.length + info.cpu.missingFeatures.length).toBeGreaterThan(0);
    for (const f of info.cpu.features) expect(flags.has(f), `${f} reported, not in /proc/cpuinfo`).toBe(true);
    for (const f of info.cpu.missingFeatures) expect(flags.has(f), `${f} in /proc/cpuinfo, reported missing`).toBe(false);
  });

  it.skipIf(Boolean(process.env.VT_CPU_ISA))('takes the best matmul path the /proc/cpuinfo flags allow', () => {
    const has = (...f: string[]) => f.every((x) => procCpuFlags().has(x));
    const best =
      process.arch === 'arm64' ? 'neon'
      : has('avx512f', 'avx2', 'fma', 'f16c') ? 'avx512'
      : has('avx2', 'fma', 'f16c') ? 'avx2'
      : 'scalar';
    expect(info.cpu.matmul).toBe(best);
    expect(info.cpu.matmulPaths).toContain(best);
  });

  it('says which binary node-gyp-build loaded: the local build in build/Release when there is one', () => {
    expect(existsSync(info.binary.path)).toBe(true);
    const local = join(ROOT, 'build/Release');
    const built = existsSync(local) && readdirSync(local).some((f) => f.endsWith('.node'));
    if (built) expect(info.binary).toStrictEqual({ kind: 'local build', path: join(local, 'vtengine.node') });
    else expect(info.binary.kind).toBe('prebuild');
  });

  it('lists the CUDA targets the build embedded (none without nvcc), with a reason when there are none', () => {
    if (info.binary.kind === 'local build') expect(info.cuda.targets).toStrictEqual(targetsFromIncHeader());
    if (info.cuda.targets.length === 0) expect(info.cuda.kernelsProblem).toMatch(/no CUDA kernels/);
    else expect(info.cuda.kernelsProblem).toBeNull();
    for (const t of info.cuda.targets) expect(t).toMatch(/^(sm|compute)_\d+[af]?$/);
  });

  it.skipIf(loaderFindsLibcuda())('without an NVIDIA driver: says so, lists no GPU, and auto picks the CPU', () => {
    expect(info.cuda.driver).toStrictEqual({ found: false, version: null, problem: expect.stringMatching(/^no NVIDIA driver: libcuda\.so\.1/) });
    expect(info.cuda.gpus).toStrictEqual([]);
    expect(info.auto.device).toBe('cpu');
    expect(info.auto.reason).toMatch(/^no NVIDIA driver/);
    expect(info.cuda.nvml.found).toBe(false);
    expect(info.cuda.nvml.problem).toMatch(/libnvidia-ml\.so\.1/);
    expect(info.cuda.gemm).toBeNull(); // no GPU: no GEMM table to consult
  });

  it('gives a reason for every GPU it cannot use, and none for one it can', () => {
    for (const g of info.cuda.gpus) expect(g.usable ? g.reason === null : typeof g.reason === 'string' && g.reason.length > 0).toBe(true);
    expect(info.auto.reason.length).toBeGreaterThan(0);
  });

  describe("device: 'auto' runs where systemInfo() says", () => {
    let engine: Engine | undefined;
    afterAll(async () => {
      await engine?.dispose();
    });
    it('loads the default model on that device', async () => {
      engine = await Engine.load({ device: 'auto' });
      expect(engine.device).toBe(info.auto.device);
    });
  });
});

describe('vtengine doctor', () => {
  const ready = existsSync(MAIN);
  const doctor = (...args: string[]) => spawnSync(process.execPath, [MAIN, 'doctor', ...args], { cwd: ROOT, encoding: 'utf8' });

  it.skipIf(!ready)('--json prints exactly what Engine.systemInfo() returns', () => {
    const ran = doctor('--json');
    expect(ran.status, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toStrictEqual(JSON.parse(JSON.stringify(info)));
  });

  it.skipIf(!ready)('prints the report as text: binary, CPU path, kernels, driver and the auto choice', () => {
    const ran = doctor();
    expect(ran.status, ran.stderr).toBe(0);
    const out = ran.stdout;
    expect(out).toContain(`binary         ${info.binary.kind}: ${info.binary.path}`);
    expect(out).toContain(`matmul path ${info.cpu.matmul}`);
    expect(out).toContain(`device 'auto'  ${info.auto.device}: ${info.auto.reason}`);
    expect(out).toMatch(info.cuda.driver.found ? /driver {9}CUDA \d+\.\d/ : /driver {9}not found/);
    for (const g of info.cuda.gpus) expect(out).toContain(`gpu ${g.index}          ${g.name}, ${g.arch}`);
  });
});

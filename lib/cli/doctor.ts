/**
 * `vtengine doctor`: what this machine and this install can run ({@link Engine.systemInfo}), as text or `--json`.
 * @internal
 * @module
 */
import type { Command } from 'commander';
import { Engine } from '../engine/engine.js';
import type { GpuInfo, SystemInfo } from '../engine/system-info.js';
import { bytes } from './format.js';

/** Adds the `doctor` command to the program. @internal */
export function addDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .description('show the binary, CPU features, CUDA kernels, driver and GPUs, and what device "auto" picks')
    .option('--json', 'print one JSON object (Engine.systemInfo())')
    .action((opts: { json?: boolean }) => {
      const info = Engine.systemInfo();
      process.stdout.write(opts.json ? `${JSON.stringify(info, null, 2)}\n` : describeSystem(info));
    });
}

/** The report as aligned `label  value` rows; a continuation row has an empty label. @internal */
export function describeSystem(s: SystemInfo): string {
  const { cpu, cuda } = s;
  const electron = s.runtime.electron ? `, Electron ${s.runtime.electron}` : '';
  const rows: Array<[string, string]> = [
    ['binary', `${s.binary.kind}: ${s.binary.path}`],
    ['cpu', `${cpu.arch}, ${cpu.threads} threads, matmul path ${cpu.matmul} (compiled: ${cpu.matmulPaths.join(' ')})`],
    ['  features', cpu.features.join(' ') || 'none of those checked'],
  ];
  if (cpu.missingFeatures.length) rows.push(['  missing', cpu.missingFeatures.join(' ')]);
  rows.push([
    'cuda kernels',
    cuda.kernelsProblem ?? `${cuda.targets.join(' ')} (need a CUDA ${cuda.minDriverVersion} driver or newer)`,
  ]);
  rows.push(['driver', cuda.driver.found ? `CUDA ${cuda.driver.version ?? '?'}` : 'not found']);
  if (cuda.driver.problem) rows.push(['', cuda.driver.problem]);
  cuda.gpus.forEach((g) => rows.push(...gpuRows(g)));
  if (cuda.gemm) {
    rows.push(['gemm', `${cuda.gemm.family}, ${cuda.gemm.measured ? `measured on ${cuda.gemm.measured}` : 'not measured on this family'}`]);
    cuda.gemm.rules.forEach((r) => rows.push(['', r]));
  }
  rows.push(...library('cuBLASLt', cuda.cublasLt.found, [cuda.cublasLt.version, cuda.cublasLt.path], cuda.cublasLt.problem));
  if (cuda.cublasLt.found) rows.push(['', 'not used: our own GEMMs serve every product (VT_CUDA_GEMM=cublaslt to compare)']);
  rows.push(...library('NVML', cuda.nvml.found, [], cuda.nvml.problem));
  rows.push([`device 'auto'`, `${s.auto.device}: ${s.auto.reason}`]);
  const head = `vtengine ${s.version} on Node ${s.runtime.node}${electron} (${s.runtime.platform}-${s.runtime.arch})\n`;
  return head + rows.map(([k, v]) => `  ${k.padEnd(15)}${v}`.trimEnd()).join('\n') + '\n';
}

function gpuRows(g: GpuInfo): Array<[string, string]> {
  const code =
    g.kernels === 'cubin' ? `cubin ${g.kernelTarget} embedded`
    : g.kernels === 'ptx' ? `no cubin for ${g.arch}: PTX ${g.kernelTarget} is JIT-compiled by the driver at the first load`
    : `no kernels for ${g.arch}`;
  const memory = `${bytes(g.totalBytes)}${g.integrated ? ' (shared with the host)' : ''}`;
  return [
    [`gpu ${g.index}`, `${g.name}, ${g.arch} (compute capability ${g.computeCapability}), ${memory}`],
    ['', `${code}; ${g.usable ? 'usable' : `not usable: ${g.reason}`}`],
  ];
}

/** "found (13.1.0, libcublasLt.so.13)", or "not found" with the loader's reason on a row of its own. */
function library(label: string, found: boolean, details: Array<string | null>, problem: string | null): Array<[string, string]> {
  if (!found) return [[label, 'not found'], ['', problem ?? 'unknown reason']];
  const d = details.filter((x): x is string => Boolean(x));
  return [[label, d.length ? `found (${d.join(', ')})` : 'found']];
}

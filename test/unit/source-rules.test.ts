// Rules of the native sources that a reader would otherwise have to trust: the engine reads the environment in
// one place (cuda/src/tuning.cpp; every switch a field of Tuning, passed explicitly), so a switch cannot hide in a
// kernel wrapper or leak into a memory estimate unseen; and the generic engine names nothing of the CUDA backend's
// namespace (cuda::), which stays in cuda/src/backend/cuda/ behind the Decoder interface and backend/cuda/cuda_plan.h.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sources(p);
    return /\.(cpp|h|cu|cuh)$/.test(name) ? [p] : [];
  });
}

// Code without its comments and string literals.
function code(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
}

// A call, not a mention in a comment.
function calls(text: string, name: string): number {
  return (code(text).match(new RegExp(`\\b${name}\\s*\\(`, 'g')) ?? []).length;
}

// Uses of the CUDA backend's namespace (cuda::, vt::cuda::), not mentions in comments.
function cudaNames(text: string): number {
  return (code(text).match(/\bcuda::/g) ?? []).length;
}

describe('native sources', () => {
  const files = [...sources(join(ROOT, 'cuda/src')), ...sources(join(ROOT, 'binding'))];

  it('read the environment in cuda/src/tuning.cpp only, through one getenv call', () => {
    const sites = files.flatMap((f) => {
      const text = readFileSync(f, 'utf8');
      const n = calls(text, 'getenv') + calls(text, 'secure_getenv');
      return n ? [`${relative(ROOT, f)}: ${n}`] : [];
    });
    expect(sites).toEqual(['cuda/src/tuning.cpp: 1']);
  });

  it('name cuda:: only inside cuda/src/backend/cuda/', () => {
    const sites = files.flatMap((f) => {
      const rel = relative(ROOT, f);
      const n = rel.startsWith('cuda/src/backend/cuda/') ? 0 : cudaNames(readFileSync(f, 'utf8'));
      return n ? [`${rel}: ${n}`] : [];
    });
    expect(sites).toEqual([]);
  });

  it('finds a cuda:: name where there is one (the rule can fail)', () => {
    expect(cudaNames('// cuda::Ops\nconst cuda::Act a = vt::cuda::Act::F32;')).toBe(2);
  });

  it('finds a getenv call where there is one (the rule can fail)', () => {
    expect(calls('int x = 0; // std::getenv("A")\nconst char *s = std::getenv("B");', 'getenv')).toBe(1);
    expect(calls('/* getenv(x) */ auto s = "getenv(";', 'getenv')).toBe(0);
  });
});

// Rules of the native sources that a reader would otherwise have to trust: the engine reads the environment in
// one place (cuda/src/tuning.cpp; every switch a field of Tuning, passed explicitly), so a switch cannot hide in a
// kernel wrapper or leak into a memory estimate unseen.
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

// A call, not a mention in a comment: comments and string literals are stripped first.
function calls(text: string, name: string): number {
  const code = text
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '')
    .replace(/"(?:[^"\\\n]|\\.)*"/g, '""');
  return (code.match(new RegExp(`\\b${name}\\s*\\(`, 'g')) ?? []).length;
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

  it('finds a getenv call where there is one (the rule can fail)', () => {
    expect(calls('int x = 0; // std::getenv("A")\nconst char *s = std::getenv("B");', 'getenv')).toBe(1);
    expect(calls('/* getenv(x) */ auto s = "getenv(";', 'getenv')).toBe(0);
  });
});

// The checkpoint fuzzer (scripts/fuzz-checkpoints.mjs) for a bounded count: 150 mutants of the fast bases (every
// fixture and the default model; not the slow qwen3-tok), fixed seed, each loaded and run in a child process.
// Issue 19's acceptance: no crash, no hang, no untyped error, and no silent load of the two classes it names
// (offsets that overlap or are misaligned; an activation the engine does not implement). Silent loads of the
// oracle's other kinds (RoPE, bias, sliding window, duplicate tensor names, ...) are reported by their own test.
// The fuzzer's tally is printed whatever the outcome. With main's strict loader merged (503e314), the acceptance
// tests pass here; the other-kinds test fails on one mutant (rms_norm_eps: null, which the loader reads as absent
// while transformers fails on it). Reproduce a failing mutant with
//   node scripts/fuzz-checkpoints.mjs --count 150 --seed 19 --bases <the bases below> --failures DIR
// then --replay DIR/<mutant>.
import { beforeAll, describe, expect, it } from 'vitest';

// @ts-expect-error -- plain .mjs scripts shared with the command-line fuzzer
import { FAST_BASES } from '../../scripts/fuzz/bases.mjs';
// @ts-expect-error -- idem
import { ACCEPTANCE_KINDS } from '../../scripts/fuzz/oracle.mjs';
// @ts-expect-error -- idem
import { runFuzz } from '../../scripts/fuzz/run.mjs';
// @ts-expect-error -- idem
import { formatTally } from '../../scripts/fuzz/tally.mjs';

const COUNT = 150;
const SEED = 19;

interface Result {
  index: number;
  base: string;
  class: string;
  phase: string;
  code?: string;
  message?: string;
  mutations: Array<{ kind: string; detail: string }>;
  violations?: Array<{ kind: string; detail: string }>;
}

let results: Result[] = [];

/** One line per mutant of `cls` (optionally only those with a violation kind `keep` accepts). */
function lines(cls: string, keep: (kind: string) => boolean = () => true): string[] {
  return results
    .filter((r) => r.class === cls && (cls !== 'silent' || r.violations!.some((v) => keep(v.kind))))
    .map((r) => {
      const what = r.mutations.map((m) => `${m.kind}: ${m.detail}`).join(' + ');
      const why = r.violations ? r.violations.filter((v) => keep(v.kind)).map((v) => `${v.kind}: ${v.detail}`).join('; ') : `${r.phase} ${r.code ?? ''} ${r.message ?? ''}`;
      return `#${r.index} ${r.base} | ${what} | ${why}`;
    });
}

describe(`checkpoint fuzzer: ${COUNT} mutants, seed ${SEED}`, () => {
  beforeAll(async () => {
    const run = (await runFuzz({ count: COUNT, seed: SEED, jobs: 2, bases: FAST_BASES, timeoutMs: 30_000 })) as {
      results: Result[];
      tally: unknown;
    };
    results = run.results;
    console.log(`${formatTally(run.tally, run.results)}\n(bases: ${FAST_BASES.join(',')})`);
  }, 900_000);

  it('no mutant crashes the process', () => expect(lines('crash')).toEqual([]));
  it('no mutant hangs', () => expect(lines('hang')).toEqual([]));
  it('every error is an EngineError with a code other than ERR_INTERNAL', () => expect(lines('untyped')).toEqual([]));
  it('the fuzzer itself never fails', () => expect(lines('fuzzer-error')).toEqual([]));
  it('no silent load of overlapping/misaligned offsets or an unimplemented activation', () =>
    expect(lines('silent', (k) => ACCEPTANCE_KINDS.has(k))).toEqual([]));
  it('no silent load of any other kind the oracle knows', () => expect(lines('silent', (k) => !ACCEPTANCE_KINDS.has(k))).toEqual([]));
  it('draws every file family', () => {
    const families = new Set(results.flatMap((r) => r.mutations.map((m) => m.kind.split('/')[0])));
    expect([...families].sort()).toEqual(['body', 'config', 'generation-config', 'header', 'index', 'tokenizer', 'tokenizer-config']);
  });
});

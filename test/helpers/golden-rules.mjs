// The golden rules: how close a generation must come to a fixture's transformers reference (float64,
// scripts/make_fixtures.py). One definition for the vitest golden tests (test/golden/greedy.test.ts, through
// test/helpers/fixtures.ts, which types it) and test/helpers/golden-check.mjs (node alone, against an installed
// package: hence plain JavaScript).
// A reference prompt (reference.json) holds greedy, margins, top_ids and top_logprobs, an entry per step; a generated
// step's logprobs are { top: [{ tokenId, logprob }] }.

/** Below this reference top-1/top-2 margin, fp32 rounding may legitimately pick the other token. */
export const MIN_MARGIN = 1e-3;

/** How far each of the reference's top-5 logprobs may be from ours, in nats. */
export const LOGPROB_TOL = 2e-3;

/** The number of leading steps whose greedy choice the reference calls decisive (margin >= minMargin). */
export function decisiveSteps(p, minMargin = MIN_MARGIN) {
  const i = p.margins.findIndex((m) => m < minMargin);
  return i < 0 ? p.margins.length : i;
}

/**
 * How many leading steps' logprobs are compared, given `n` decisive steps. Logprobs are comparable while the
 * contexts agree: through step n (its own distribution still is).
 */
export function logprobSteps(p, n) {
  return Math.min(n + 1, p.greedy.length);
}

/**
 * The reference's top ids at `step` against ours: { id, want, have, diff } each, `have` undefined when the id is
 * not in our top list. Such an id fell out of it only through a near tie with our weakest entry, so its diff is
 * measured against that entry. Each diff must be <= LOGPROB_TOL.
 */
export function topLogprobDiffs(p, step, got) {
  const ours = new Map(got.top.map((t) => [t.tokenId, t.logprob]));
  const weakest = Math.min(...got.top.map((t) => t.logprob));
  return p.top_ids[step].map((id, k) => {
    const want = p.top_logprobs[step][k];
    const have = ours.get(id);
    return { id, want, have, diff: Math.abs((have ?? weakest) - want) };
  });
}

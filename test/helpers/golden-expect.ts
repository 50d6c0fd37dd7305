// The golden rules (golden-rules.mjs) as vitest assertions, for the CPU and GPU golden tests alike.
import { expect } from 'vitest';

import { LOGPROB_TOL, type ReferencePrompt, topLogprobDiffs } from './fixtures.js';

/** Each of the reference's top-5 logprobs at `step` within LOGPROB_TOL of ours. */
export function expectTopLogprobs(
  ref: ReferencePrompt,
  step: number,
  got: { tokenId: number; logprob: number; top: Array<{ tokenId: number; logprob: number }> },
): void {
  for (const { id, want, have, diff } of topLogprobDiffs(ref, step, got)) {
    if (have === undefined) {
      // It fell out of our top-5 only through a near tie with the 5th entry (so its diff is to that entry).
      expect(diff, `step ${step}: reference top id ${id} missing`).toBeLessThanOrEqual(LOGPROB_TOL);
    } else {
      expect(diff, `step ${step}, id ${id}: ${have} vs ${want}`).toBeLessThanOrEqual(LOGPROB_TOL);
    }
  }
}

/**
 * Teacher-forced scoring: how likely the model finds a given token sequence.
 * @module
 */

/** What {@link Engine.score} returns. */
export interface ScoreResult {
  /** The scored token ids. */
  tokenIds: number[];
  /** `logprobs[i]` is the natural-log probability of `tokenIds[i + 1]` given `tokenIds[0..i]`. */
  logprobs: number[];
  /** The mean negative log-likelihood per predicted token (nats): `-mean(logprobs)`. */
  meanNll: number;
  /** `exp(meanNll)`. */
  perplexity: number;
}

// bench/serve.mjs's figures of one batch, computed the same way for its two sides (in-process streams and HTTP
// clients) from the same records, so that the two differ only in what they measured.
//
// A record is one request, its times in ms from the moment the batch started sending: `sent` (its generate() call
// or its HTTP request sent), `events` (the times of the chunks that carried text: what a streaming client can show;
// the server sends nothing for a chunk whose text is held back, so the in-process side counts those out too),
// `end` (its stream ended) and `tokens` (completion tokens, from the result's or the response's usage).

import { median } from './workload.mjs';

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
const percentiles = (values) => {
  const sorted = Float64Array.from(values).sort();
  return { p50: pct(sorted, 50), p90: pct(sorted, 90), p99: pct(sorted, 99) };
};

/**
 * tokS: all completion tokens over the time from the first request sent to the last one ended. steadyTokS:
 * bench/node-api.mjs's figure, the tokens that arrived after the last request's first one over the time from then to
 * the last arrival; a text event counts as its request's tokens / events (exact unless some text was held back, when
 * the next event carries it). ttftMs: per request, from sent to its first text event. itlMs: every gap between two
 * text events of a request, all requests pooled.
 */
export function summarize(records) {
  const live = records.filter((r) => r.events.length > 0);
  const tokens = records.reduce((s, r) => s + r.tokens, 0);
  const wall = Math.max(...records.map((r) => r.end));
  const lastFirst = Math.max(...live.map((r) => r.events[0]));
  const lastArrival = Math.max(...live.map((r) => r.events.at(-1)));
  let steady = 0;
  for (const r of live) steady += (r.events.filter((t) => t > lastFirst).length * r.tokens) / r.events.length;
  const gaps = [];
  for (const r of live) for (let i = 1; i < r.events.length; i++) gaps.push(r.events[i] - r.events[i - 1]);
  return {
    tokS: (tokens / wall) * 1e3,
    steadyTokS: lastArrival > lastFirst ? (steady / (lastArrival - lastFirst)) * 1e3 : null,
    ttftMs: percentiles(live.map((r) => r.events[0] - r.sent)),
    itlMs: gaps.length ? percentiles(gaps) : { p50: null, p90: null, p99: null },
    completionTokens: tokens,
    silentRequests: records.length - live.length, // streams that carried no text at all (should be 0)
  };
}

/** The median of each figure over runs (each percentile's median, not a percentile of the pooled runs). */
export function medianOfRuns(runs) {
  const m = (get) => {
    const v = runs.map(get).filter((x) => x !== null);
    return v.length ? median(v) : null;
  };
  const pcts = (key) => ({ p50: m((r) => r[key].p50), p90: m((r) => r[key].p90), p99: m((r) => r[key].p99) });
  return {
    tokS: m((r) => r.tokS),
    steadyTokS: m((r) => r.steadyTokS),
    ttftMs: pcts('ttftMs'),
    itlMs: pcts('itlMs'),
    completionTokens: m((r) => r.completionTokens),
    runs,
  };
}

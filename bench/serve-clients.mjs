// bench/serve.mjs's HTTP clients, forked by it: a process of their own, so that parsing N event streams does not run
// on the server's event loop (the figures would then measure the clients too). A process rather than a worker
// thread: it is how real clients reach a server, and its heap, its garbage collections and its share of the CPU are
// apart from the server's.
//
// The parent sends { url, model, body, prompts, n } for each batch; the clients send all n requests at once
// (`POST /v1/completions`, streamed, usage included) and answer { records } in bench/serve-stats.mjs's shape, or
// { error }. They use node:http, not fetch or the openai package, whose per-event costs are the client's, and a new
// connection per request: a pooled socket that the server has closed meanwhile (its keep-alive timeout is 5 s, and
// an in-process run comes between two HTTP runs) would fail a request; a loopback connect costs tens of
// microseconds, counted in the TTFT.
import { request } from 'node:http';

/** One streamed completion; times relative to t0. */
function complete(url, payload, t0) {
  return new Promise((resolve, reject) => {
    const record = { sent: 0, events: [], end: 0, tokens: -1 };
    const req = request(`${url}/completions`, {
      method: 'POST',
      agent: false, // not Node 20's keep-alive global agent: a connection of its own (see above)
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.setEncoding('utf8');
      let buffer = '';
      if (res.statusCode !== 200) {
        res.on('data', (d) => (buffer += d));
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${buffer}`)));
        return;
      }
      let done = false;
      res.on('data', (data) => {
        const t = performance.now() - t0; // events that came in one read share its time, as a client sees them
        buffer += data;
        for (let i; (i = buffer.indexOf('\n\n')) >= 0; ) {
          const event = buffer.slice(0, i);
          buffer = buffer.slice(i + 2);
          if (!event.startsWith('data: ')) continue;
          const json = event.slice(6);
          if (json === '[DONE]') {
            done = true;
            continue;
          }
          const chunk = JSON.parse(json);
          if (chunk.error) return reject(new Error(`error event: ${JSON.stringify(chunk.error)}`));
          if (chunk.usage) record.tokens = chunk.usage.completion_tokens;
          if (chunk.choices?.[0]?.text) record.events.push(t);
        }
      });
      res.on('end', () => {
        record.end = performance.now() - t0;
        if (!done || record.tokens < 0) reject(new Error('the stream ended without [DONE] or usage'));
        else resolve(record);
      });
      res.on('error', reject);
    });
    record.sent = performance.now() - t0;
    req.end(payload);
  });
}

async function batch({ url, model, body, prompts, n }) {
  // Every body serialized before the first request goes, so the n requests leave in one burst.
  const payloads = prompts.slice(0, n).map((prompt) => JSON.stringify({ model, prompt, ...body }));
  const t0 = performance.now();
  return Promise.all(payloads.map((payload) => complete(url, payload, t0)));
}

process.on('message', (job) => {
  batch(job).then(
    (records) => process.send({ records }),
    (err) => process.send({ error: String(err?.stack ?? err) }),
  );
});
process.on('disconnect', () => process.exit(0)); // the parent is done (or gone)

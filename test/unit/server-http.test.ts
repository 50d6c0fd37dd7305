// The server's HTTP side, below what an OpenAI client shows: option checks and the refusal to listen off loopback
// without a key, routes, methods, content types and sizes, the Host check of a key-less loopback server, a client
// leaving a whole (non-streamed) request, close() with requests in flight, the `vtengine serve` command and the
// CommonJS entry. The default model on the CPU.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { Engine } from '../../lib/index.js';
import { type Server, type ServerOptions, createServer } from '../../lib/server/index.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(ROOT, 'dist/cli/main.js');
const built = existsSync(MAIN) && existsSync(join(ROOT, 'dist/server/index.cjs'));

let engine: Engine;
const servers: Server[] = [];

async function listening(options: ServerOptions = {}): Promise<{ server: Server; url: string; origin: string }> {
  const server = createServer(engine, { port: 0, ...options });
  servers.push(server);
  const { url } = await server.listen();
  return { server, url, origin: url.replace(/\/v1$/, '') };
}

/** The error code of what `run` throws or rejects with. */
async function codeOf(run: () => unknown): Promise<string> {
  try {
    await run();
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
  return 'no error';
}

/** A request with a chosen Host header (fetch does not let a caller set it). */
function get(origin: string, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${origin}${path}`, { headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function post(url: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...init });
}

/** A request the engine cannot end by itself before max_tokens: end-of-sequence banned. */
function endless(stream: boolean): Record<string, unknown> {
  const noEos = Object.fromEntries(engine.modelInfo.eosTokenIds.map((id) => [String(id), -100]));
  return { prompt: 'def f(x):', max_tokens: engine.modelInfo.maxContext - 64, temperature: 0, logit_bias: noEos, stream };
}

function idle(): { running: number; waiting: number; paused: number; kvBlocksUsed: number } {
  const s = engine.stats();
  return { running: s.requestsRunning, waiting: s.requestsWaiting, paused: s.requestsPaused, kvBlocksUsed: s.kvBlocksUsed };
}

/**
 * Makes the server's next generation hold at 8 tokens (an iterator nobody reads: it pauses, keeping its KV), so a
 * non-streamed request can only end by an abort or close(): run free it could reach its length before a late test.
 */
function holdNextGeneration(): void {
  const generate = engine.generate.bind(engine);
  vi.spyOn(engine, 'generate').mockImplementationOnce((input, options) => {
    const gen = generate(input, { ...options, highWaterMark: 8 });
    gen[Symbol.asyncIterator]();
    return gen;
  });
}

beforeAll(async () => {
  engine = await Engine.load({ device: 'cpu', threads: 2 });
});

afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  await engine?.dispose();
});

describe('createServer and listen', () => {
  it('refuses bad options and a disposed engine with ERR_INVALID_OPTION', async () => {
    expect(await codeOf(() => createServer(engine, { prot: 8080 } as ServerOptions))).toBe('ERR_INVALID_OPTION');
    expect(await codeOf(() => createServer(engine, { port: 70_000 }))).toBe('ERR_INVALID_OPTION');
    expect(await codeOf(() => createServer(engine, { apiKey: 'has space' }))).toBe('ERR_INVALID_OPTION');
    expect(await codeOf(() => createServer({} as Engine))).toBe('ERR_INVALID_OPTION');
    const other = await Engine.load({ device: 'cpu', threads: 1 });
    await other.dispose();
    expect(await codeOf(() => createServer(other))).toBe('ERR_INVALID_OPTION');
  });

  it('will not listen off loopback without an API key unless allowUnauthenticated; with a key it does', async () => {
    const open = createServer(engine, { host: '0.0.0.0', port: 0 });
    await expect(open.listen()).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('apiKey') });
    await open.close();
    expect(open.address).toBeNull();
    const { server } = await listening({ host: '0.0.0.0', apiKey: 'k' });
    expect(server.address).toMatchObject({ host: '0.0.0.0' });
    await server.close();
    expect(server.address).toBeNull();
    const { server: allowed } = await listening({ host: '0.0.0.0', allowUnauthenticated: true });
    expect(allowed.address?.port).toBeGreaterThan(0);
    await allowed.close();
  });

  it('a port in use is an ERR_INVALID_OPTION that says so', async () => {
    const { server } = await listening();
    const second = createServer(engine, { port: server.address!.port });
    await expect(second.listen()).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION', message: expect.stringContaining('in use') });
  });
});

describe('routes', () => {
  let url: string;
  let origin: string;
  beforeAll(async () => {
    ({ url, origin } = await listening({ maxBodyBytes: 2048 }));
  });

  it('answers failures in the OpenAI error shape with fitting statuses', async () => {
    const cases: Array<[Promise<Response>, number, string]> = [
      [fetch(`${url}/embeddings`), 404, 'not_found'],
      [fetch(`${url}/completions`), 405, 'method_not_allowed'],
      [fetch(`${url}/completions`, { method: 'POST', body: '{"prompt":"x"}', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type'],
      [fetch(`${url}/completions`, { method: 'POST', body: '{"prompt":', headers: { 'content-type': 'application/json' } }), 400, 'invalid_json'],
      [post(`${url}/completions`, ['x']), 400, 'invalid_json'],
      [post(`${url}/completions`, { prompt: 'x'.repeat(4096) }), 413, 'request_too_large'],
      [post(`${url}/completions`, { prompt: ['a', 'b'] }), 400, 'unsupported_value'],
      [post(`${url}/completions`, { prompt: 'x', echo: true }), 400, 'unsupported_parameter'],
      [post(`${url}/completions`, { prompt: 'x', stream_options: { include_usage: true } }), 400, 'invalid_value'],
    ];
    for (const [response, status, code] of cases) {
      const res = await response;
      expect([res.status, res.headers.get('content-type')]).toEqual([status, 'application/json']);
      const body = (await res.json()) as { error: Record<string, unknown> };
      expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
      expect(body.error.code).toBe(code);
      expect(body.error.type).toBe('invalid_request_error');
    }
    expect((await fetch(`${url}/completions`)).headers.get('allow')).toBe('POST');
  });

  it('GET and HEAD /health report the engine ready', async () => {
    const res = await fetch(`${origin}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok', requests: { running: 0, waiting: 0, paused: 0 } });
    expect((await fetch(`${origin}/health`, { method: 'HEAD' })).status).toBe(200);
  });

  it('GET /health counts a request paused by a reader that fell behind, apart from the running ones', async () => {
    // An iterator taken and never read: 4 tokens ahead of it, the request pauses (EOS off, so it cannot end first).
    const gen = engine.generate({ prompt: 'def f(x):' }, { maxTokens: 200, temperature: 0, stopTokenIds: [], highWaterMark: 4 });
    gen[Symbol.asyncIterator]();
    await vi.waitFor(() => expect(engine.stats().requestsPaused).toBe(1), { timeout: 30_000 });
    expect(await (await fetch(`${origin}/health`)).json()).toEqual({ status: 'ok', requests: { running: 0, waiting: 0, paused: 1 } });
    gen.abort();
    expect((await gen).finishReason).toBe('abort');
  });

  it('without a key, a loopback server answers only requests addressed to this machine (no DNS rebinding)', async () => {
    const port = new URL(url).port;
    expect((await get(origin, '/v1/models', 'evil.example')).status).toBe(403);
    expect(JSON.parse((await get(origin, '/v1/models', `evil.example:${port}`)).body)).toMatchObject({ error: { code: 'host_not_allowed' } });
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, 'localhost']) expect((await get(origin, '/v1/models', host)).status).toBe(200);
    const keyed = await listening({ apiKey: 'k' });
    const res = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(`${keyed.url}/models`, { headers: { host: 'api.example', authorization: 'Bearer k' } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(res).toBe(200); // with a key, any name may reach it (a reverse proxy)
  });
});

describe('ignore_eos', () => {
  it("vLLM's ignore_eos: end-of-sequence, made certain by logit_bias, no longer ends a completion; non-booleans are a 400", async () => {
    const { url } = await listening();
    const forceEos = Object.fromEntries(engine.modelInfo.eosTokenIds.map((id) => [String(id), 100]));
    const body = { prompt: 'def f(x):', max_tokens: 12, temperature: 0, logit_bias: forceEos };
    const stopped = await (await post(`${url}/completions`, body)).json();
    expect(stopped.choices[0].finish_reason).toBe('stop');
    expect(stopped.usage.completion_tokens).toBe(1);
    const ignored = await (await post(`${url}/completions`, { ...body, ignore_eos: true })).json();
    expect(ignored.choices[0].finish_reason).toBe('length');
    expect(ignored.usage.completion_tokens).toBe(12);
    const bad = await post(`${url}/completions`, { ...body, ignore_eos: 'yes' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.param).toBe('ignore_eos');
  });
});

describe('requests in flight', () => {
  it('a client that leaves a whole (non-streamed) request aborts its generation', async () => {
    const { url } = await listening();
    const before = engine.stats().tokensGenerated;
    const controller = new AbortController();
    holdNextGeneration();
    const pending = post(`${url}/completions`, endless(false), { signal: controller.signal }).catch((err: Error) => err.name);
    await vi.waitFor(() => expect(engine.stats().requestsPaused).toBe(1), { timeout: 30_000 });
    controller.abort();
    expect(await pending).toBe('AbortError');
    // Held, it keeps its KV blocks until the abort reaches the engine.
    await vi.waitFor(() => expect(idle()).toEqual({ running: 0, waiting: 0, paused: 0, kvBlocksUsed: 0 }), { timeout: 30_000 });
    expect(engine.stats().tokensGenerated - before).toBe(8);
    vi.restoreAllMocks();
  });

  it('close() ends streams with an error event and whole requests with a 503, frees the engine, and resolves', async () => {
    const { server, url } = await listening();
    const streamed = await post(`${url}/completions`, endless(true));
    expect(streamed.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const reader = streamed.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    expect(first).toMatch(/^data: \{/);
    holdNextGeneration();
    const whole = post(`${url}/completions`, endless(false));
    // Both in flight: the stream may be paused too (its client reads no more, so the server's loop waits on it).
    await vi.waitFor(() => expect(engine.stats().requestsRunning + engine.stats().requestsPaused).toBe(2), { timeout: 30_000 });
    expect(server.activeRequests).toBe(2);

    await server.close();
    let rest = first;
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    const events = rest.trimEnd().split('\n\n').map((e) => e.replace(/^data: /, ''));
    expect(events.at(-1)).not.toBe('[DONE]');
    expect(JSON.parse(events.at(-1)!)).toMatchObject({ error: { code: 'service_unavailable', type: 'server_error' } });
    const res = await whole;
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ error: { code: 'service_unavailable' } });
    expect(idle()).toEqual({ running: 0, waiting: 0, paused: 0, kvBlocksUsed: 0 });
    vi.restoreAllMocks();
    expect(server.address).toBeNull();
    expect(server.activeRequests).toBe(0);
    await expect(fetch(`${url}/models`)).rejects.toThrow();
  });

  it('close() does not wait for a request body still arriving, and reports nothing on stderr', async () => {
    const { server, origin } = await listening();
    const errors = vi.spyOn(console, 'error');
    try {
      const headers = { 'content-type': 'application/json', 'content-length': '100' };
      const req = httpRequest(`${origin}/v1/completions`, { method: 'POST', headers });
      const failed = new Promise((resolve) => req.on('error', resolve));
      req.write('{"prompt": ');
      await vi.waitFor(() => expect(server.activeRequests).toBe(1), { timeout: 30_000 });
      await server.close();
      expect(await failed).toMatchObject({ code: 'ECONNRESET' });
      expect(server.activeRequests).toBe(0);
      expect(errors).not.toHaveBeenCalled();
    } finally {
      errors.mockRestore();
    }
  });
});

describe.skipIf(!built)('built package', () => {
  it('require("vtengine/server") gives the same API from CommonJS', () => {
    const out = execFileSync(process.execPath, ['-e', "const s = require('vtengine/server'); console.log(Object.keys(s).sort().join(','))"], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(out.trim()).toBe('Server,createServer');
  });

  it.each(['SIGINT', 'SIGTERM'] as const)('vtengine serve prints its URL, serves, and stops cleanly on %s', async (signal) => {
    let child: ChildProcess | undefined;
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child = spawn(process.execPath, [MAIN, 'serve', '--port', '0', '--threads', '1', '--model-name', 'toy'], { cwd: ROOT });
        let out = '';
        child.stdout!.setEncoding('utf8').on('data', (d: string) => {
          out += d;
          const m = /serving "toy" at (http:\/\/\S+)\n/.exec(out);
          if (m) resolve(m[1]);
        });
        child.on('exit', (code) => reject(new Error(`vtengine serve exited with ${code} before listening`)));
      });
      const models = (await (await fetch(`${url}/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toEqual(['toy']);
      const exited = new Promise<number | null>((resolve) => child!.on('exit', resolve));
      child!.kill(signal);
      expect(await exited).toBe(0);
    } finally {
      if (child && child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('vtengine serve --host 0.0.0.0 without a key fails with ERR_INVALID_OPTION', async () => {
    const { VTENGINE_API_KEY: _, ...env } = process.env;
    const ran = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [MAIN, 'serve', '--host', '0.0.0.0', '--port', '0', '--quiet'], { cwd: ROOT, env });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(ran.code).toBe(1);
    expect(ran.stderr).toMatch(/^error \[ERR_INVALID_OPTION\]: .*apiKey/m);
  });
});

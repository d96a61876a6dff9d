// dynamo-frontend as a process (graceful shutdown with a stream in flight, HTTPS, its CLI) and
// embedded in a worker thread.
import { once as onceEvent } from 'node:events';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startChild } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { makeTestTlsFiles } from '@dynamo/testing/tls';
import { Deployment, once, packageDir, post, readStream, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';

const cli = join(packageDir, 'dist', 'cli.js');
let deployment: Deployment;
beforeAll(async () => {
  deployment = await Deployment.start(SETUPS[0]!);
  deployment.successorWorker(['--delay-ms', '20']);
}, 60_000);
afterAll(() => deployment.stop());

describe('dynamo-frontend process', () => {
  it('on SIGTERM finishes the stream in flight, refuses new connections and exits 0', async () => {
    const { child, url } = await deployment.frontend();
    await waitForModel(url, 'successor', 'successor', 1);
    const res = await post(url, '/v1/completions', { model: 'successor', prompt: [500], max_tokens: 50, stream: true });
    // Each step has its own bound, so a hang says which step and what the frontend logged.
    const within = <T>(what: string, p: Promise<T>) =>
      Promise.race([
        p,
        new Promise<never>((_, reject) =>
          setTimeout(
            () => reject(new Error(`${what} took over 20 s; frontend stderr:\n${child.stderr().slice(-4000)}\nstdout:\n${child.lines.slice(-20).join('\n')}`)),
            20_000,
          ),
        ),
      ]);
    // SIGTERM at the first event: the other 49 tokens are still to come (20 ms apart), and a loaded
    // machine that merges the rest into a few events still gets its signal.
    const result = await within(
      'the stream',
      readStream(
        res,
        once(1, () => child.child.kill('SIGTERM')),
      ),
    );
    expect(result).toMatchObject({ finishes: ['length'], done: true });
    expect(await within('the exit after SIGTERM', child.exited)).toBe(0);
    await expect(fetch(`${url}/live`)).rejects.toThrow();
    // Longer than the two start-up waits above together (30 s each): the first test also waits out
    // the worker's start, which a loaded CI machine has taken past 30 s.
  }, 90_000);

  // The CLIs' first lines are an sh launcher: node with a small young generation, glibc with two
  // malloc arenas unless the environment sets another number (Linux: read back from /proc).
  it.runIf(process.platform === 'linux')(
    'run as programs, dynamo-frontend and dynamo-sample-engine start node with their memory settings',
    async () => {
      const frontend = await deployment.frontend([], { MALLOC_ARENA_MAX: '' });
      const worker = deployment.sampleWorker(['--model-name', 'launcher-check'], { MALLOC_ARENA_MAX: '4' });
      await waitForModel(frontend.url, 'launcher-check', 'sample', 1);
      const args = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      const env = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      for (const pid of [frontend.child.child.pid!, worker.child.pid!]) {
        expect(args(pid).slice(0, 2)).toEqual(['node', '--max-semi-space-size=4']);
      }
      expect(env(frontend.child.child.pid!)).toContain('MALLOC_ARENA_MAX=2');
      expect(env(worker.child.pid!)).toContain('MALLOC_ARENA_MAX=4');
      const res = await post(frontend.url, '/v1/completions', { model: 'launcher-check', prompt: [500], max_tokens: 2 });
      expect(res.status).toBe(200);
    },
    60_000,
  );

  it('serves HTTPS with --tls-cert-path and --tls-key-path', async () => {
    const tls = makeTestTlsFiles();
    const port = await freePort();
    const child = startChild(
      process.execPath,
      [cli, '--http-host', '127.0.0.1', '--http-port', String(port), '--tls-cert-path', tls.certFile, '--tls-key-path', tls.keyFile],
      deployment.env,
    );
    deployment.children.push(child);
    const ca = readFileSync(tls.caFile);
    const call = (method: string, path: string, body?: unknown) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path, method, ca, headers: { 'content-type': 'application/json' } }, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on('error', reject).end(body === undefined ? undefined : JSON.stringify(body));
      });
    await waitFor(
      'the HTTPS frontend to list the model',
      async () => (await call('GET', '/v1/models').catch(() => undefined))?.body.includes('successor'),
      30_000,
    );
    const res = await call('POST', '/v1/completions', { model: 'successor', prompt: [65], max_tokens: 3 });
    expect(res.status).toBe(200);
    // Tokens 66, 67, 68 of Qwen3's byte-level vocabulary.
    expect(JSON.parse(res.body).choices[0].text).toBe('cde');
    child.child.kill('SIGTERM');
    expect(await child.exited).toBe(0);
  });

  // The socket group that reads the token streams is native state of the thread: a worker thread
  // whose loop still held it when it ended would abort the whole process.
  it('streams from a worker thread, and the thread ends cleanly after close', async () => {
    const thread = new Worker(join(packageDir, 'test', 'fixtures', 'frontend-thread.mjs'), { env: { ...process.env, ...deployment.env } });
    try {
      const [url] = (await onceEvent(thread, 'message')) as [string];
      await waitForModel(url, 'successor', 'successor', 1);
      const streams = await Promise.all(
        [500, 600, 700].map(async (token) =>
          readStream(await post(url, '/v1/completions', { model: 'successor', prompt: [token], max_tokens: 20, stream: true })),
        ),
      );
      for (const stream of streams) expect(stream).toMatchObject({ finishes: ['length'], done: true });
      thread.postMessage('close');
      const [code] = (await onceEvent(thread, 'exit')) as [number];
      expect(code).toBe(0);
    } finally {
      await thread.terminate();
    }
  }, 60_000);

  it.each([
    [['--help'], 0, /^Usage: dynamo-frontend/],
    [['--router-mode', 'bogus'], 2, /--router-mode: .*round-robin/],
    [['--http-port', '70000'], 2, /--http-port/],
    [['--tls-cert-path', '/nonexistent.pem'], 2, /tlsCertPath and tlsKeyPath go together/],
    [['--no-such-flag'], 2, /no-such-flag/],
    [['--dyn-tool-call-parser', 'nope'], 2, /unknown tool_call_parser "nope"; known: deepseek_v3, hermes/],
  ])('dynamo-frontend %j exits %i and says why', async (args, code, message) => {
    const child = startChild(process.execPath, [cli, ...args], { DYN_LOG: 'error' });
    expect(await child.exited).toBe(code);
    expect(code === 0 ? child.lines.join('\n') : child.stderr()).toMatch(message);
  });
});

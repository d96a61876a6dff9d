// The hello-world graph under dynamo-serve, end to end over its HTTP route, on the embedded
// default (file discovery, tcp) and on etcd + NATS; and TextProcessor called by a client in a
// separate process.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { startChild } from '@dynamo/testing/child';
import { EtcdServer } from '@dynamo/testing/etcd';
import { freePort } from '@dynamo/testing/free-port';
import { startNatsServer } from '@dynamo/testing/nats';
import { type ServeProcess, startServe } from '@dynamo/testing/dynamo-serve';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const scratch = mkdtempSync(join(tmpdir(), 'sdk-hello-'));
const fileEnv = { DYN_FILE_KV: join(scratch, 'kv'), DYN_DISCOVERY_BACKEND: undefined, DYN_REQUEST_PLANE: undefined };
const running: ServeProcess[] = [];
afterAll(() => {
  for (const s of running) if (s.child.exitCode === null) s.child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

function serve(args: string[], env: Record<string, string | undefined>): ServeProcess {
  const s = startServe(args, env, root);
  running.push(s);
  return s;
}

/** POSTs `body` to the route and returns the data of each server-sent event. */
async function generate(port: number, body: unknown): Promise<{ status: number; items: unknown[]; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/generate`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  const items = res.headers.get('content-type')?.startsWith('text/event-stream')
    ? text
        .split('\n\n')
        .filter((e) => e.startsWith('data: '))
        .map((e) => JSON.parse(e.slice(6)) as unknown)
    : [];
  return { status: res.status, items, text };
}

describe('sdk-hello-world under dynamo-serve', () => {
  it('on the embedded default with config.yaml: Frontend → Middle → Backend×2 answers POST /generate; SIGTERM exits 0', async () => {
    const port = await freePort();
    const s = serve(['src/hello-world.ts#Frontend', '-f', 'config.yaml', `--Frontend.port=${port}`, '--Frontend.host=127.0.0.1'], fileEnv);
    const workers = await s.ready();
    expect([...workers.keys()].sort()).toEqual(['Backend#1', 'Backend#2', 'Frontend#1', 'Middle#1']);
    expect(await generate(port, { text: 'test' })).toMatchObject({ status: 200, items: ['Frontend: Middle: Backend: test-moon-mars'] });
    expect((await generate(port, { text: 'two words' })).items).toEqual(['Frontend: Middle: Backend: two', 'Frontend: Middle: Backend: words-moon-mars']);
    const bad = await generate(port, { txt: 'no' });
    expect(bad.status).toBe(400);
    expect(bad.text).toMatch(/Frontend\.generate request\.text/);
    expect((await generate(port, { text: 'still serving' })).status).toBe(200);
    expect(s.stdout).toContain(`Frontend listening on port ${port}`);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(s.stdout).toContain('Frontend stopped');
  });

  it('on etcd + NATS, with the decorator defaults', async () => {
    const etcd = await EtcdServer.start();
    const nats = await startNatsServer();
    try {
      const port = await freePort();
      const s = serve(
        [
          'src/hello-world.ts#Frontend',
          '--discovery-backend',
          'etcd',
          '--etcd-endpoints',
          etcd.endpoint,
          '--request-plane',
          'nats',
          '--nats-server',
          nats.url,
          `--Frontend.port=${port}`,
        ],
        { DYN_FILE_KV: undefined },
      );
      await s.ready();
      expect(s.logs.some((l) => l.msg === 'distributed runtime started' && l.discovery === 'etcd' && l.request_plane === 'nats')).toBe(true);
      expect((await generate(port, { text: 'test' })).items).toEqual(['Frontend: Middle: Backend: test-mid-back']);
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
    } finally {
      await nats.stop();
      await etcd.stop();
    }
  });

  it('TextProcessor answers a client running in a separate process', async () => {
    const s = serve(['src/text-processor.ts#TextProcessor'], fileEnv);
    await s.ready();
    const client = startChild(process.execPath, ['--import', 'tsx', 'src/client.ts', 'typed', 'endpoints'], { ...fileEnv, DYN_LOG: 'warn' }, root);
    const code = await client.exited;
    expect(code, client.stderr()).toBe(0);
    expect(client.lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      { index: 0, word: 'TYPED', length: 5 },
      { index: 1, word: 'ENDPOINTS', length: 9 },
    ]);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
  });
});

// The processor example end to end with real processes: dynamo-serve runs Processor and Worker,
// our dynamo-frontend finds Processor as a Text-input chat model, and curl's chat completion is
// produced through Processor → Worker.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type Child, startChild } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { type ServeProcess, startServe } from '@dynamo/testing/dynamo-serve';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);
const frontendCli = join(dirname(require.resolve('@dynamo/frontend/package.json')), 'dist/cli.js');
const kv = mkdtempSync(join(tmpdir(), 'sdk-processor-'));
const env = { DYN_FILE_KV: kv, DYN_DISCOVERY_BACKEND: undefined, DYN_REQUEST_PLANE: undefined };

function curl(port: number, body: unknown): { status: number; body: string } {
  const r = spawnSync(
    'curl',
    ['-sS', '-w', '\n%{http_code}', `http://127.0.0.1:${port}/v1/chat/completions`, '-H', 'content-type: application/json', '-d', JSON.stringify(body)],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (r.status !== 0) throw new Error(`curl failed: ${r.stderr}`);
  const lines = r.stdout.trimEnd().split('\n');
  return { status: Number(lines.pop()), body: lines.join('\n') };
}

describe('sdk-processor behind dynamo-frontend', () => {
  let serve: ServeProcess;
  let frontend: Child;
  let port: number;

  beforeAll(async () => {
    const modelDir = qwen3ModelDir();
    serve = startServe(['src/processor.ts#Processor', `--Processor.modelPath=${modelDir}`], env, root);
    await serve.ready();
    port = await freePort();
    frontend = startChild(process.execPath, [frontendCli, '--http-host', '127.0.0.1', '--http-port', String(port)], { ...env, DYN_LOG: 'warn' });
    await waitFor(
      'the model on /v1/models',
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/v1/models`);
        return res.ok && ((await res.json()) as { data: Array<{ id: string }> }).data.some((m) => m.id === 'sdk-processor');
      },
      30_000,
    );
  }, 90_000);
  afterAll(() => {
    frontend?.kill();
    if (serve?.child.exitCode === null) serve.child.kill('SIGKILL');
    rmSync(kv, { recursive: true, force: true });
  });

  it('curl /v1/chat/completions returns the chat completion Processor built from Worker’s words', () => {
    const r = curl(port, {
      model: 'sdk-processor',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'one two three' },
      ],
    });
    expect(r.status, r.body).toBe(200);
    const completion = JSON.parse(r.body) as {
      object: string;
      model: string;
      choices: Array<{ message: { role: string; content: string }; finish_reason: string }>;
      usage: Record<string, number>;
    };
    expect(completion.object).toBe('chat.completion');
    expect(completion.model).toBe('sdk-processor');
    expect(completion.choices[0]).toMatchObject({ message: { role: 'assistant', content: 'three two one' }, finish_reason: 'stop' });
    expect(completion.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
  });

  it('streams chunks, and max_tokens reaches Worker as its own maxWords', async () => {
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sdk-processor', stream: true, max_tokens: 2, messages: [{ role: 'user', content: 'a b c d' }] }),
    });
    expect(res.status).toBe(200);
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as { choices: Array<{ delta: { content?: string }; finish_reason: string | null }> });
    expect(events.map((e) => e.choices[0]?.delta.content ?? '').join('')).toBe('d c');
    expect(events.at(-1)!.choices[0]!.finish_reason).toBe('length');
  });

  it('a request the frontend refuses never reaches the graph, and the graph keeps serving', () => {
    expect(curl(port, { model: 'sdk-processor', messages: [] }).status).toBe(400);
    expect(JSON.parse(curl(port, { model: 'sdk-processor', messages: [{ role: 'user', content: 'still here' }] }).body).choices[0].message.content).toBe(
      'here still',
    );
  });
});

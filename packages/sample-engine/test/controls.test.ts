// Engine controls on a real sample-engine worker: /engine/control/<name> on its system port
// (stock Dynamo 1.6.1's status codes), sleep taking the worker out of discovery and holding its
// streams until wake_up, pause_generation modes, and clear_kv_blocks.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GenerateChunk } from '@dynamo/backend';
import { type Client, DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';
import { type Child, startChild } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const kvDir = mkdtempSync(join(tmpdir(), 'sample-controls-'));
const env = { DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: kvDir, DYN_REQUEST_PLANE: 'tcp', DYN_LOG: 'info', DYN_SYSTEM_HOST: '127.0.0.1' };

let worker: Child;
let caller: DistributedRuntime;
let client: Client;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  worker = startChild(process.execPath, [cli, '--model-path', qwen3ModelDir(), '--delay-ms', '40', '--simulate-kv-cache'], {
    ...env,
    DYN_SYSTEM_PORT: String(port),
  });
  caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, DYN_LOG: 'error' }) });
  client = await caller.endpoint('dynamo.sample.generate').client();
  await client.waitForInstances({ timeoutMs: 30_000 });
  await waitFor('the worker to report ready', async () => (await fetch(`${base}/health`).catch(() => undefined))?.status === 200, 30_000);
}, 60_000);
afterAll(async () => {
  worker?.kill();
  await caller?.shutdown();
  rmSync(kvDir, { recursive: true, force: true });
});

async function control(name: string, body?: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${base}/engine/control/${name}`, { method: 'POST', ...(body === undefined ? {} : { body }) });
  return { status: res.status, body: JSON.parse(await res.text()) as unknown };
}

/** Streams a request to the worker, recording when each chunk arrived. */
function stream(maxTokens: number, prompt: number[] = [5, 6, 7]): { chunks: Array<GenerateChunk & { at: number }>; done: Promise<void> } {
  const id = client.instanceIds()[0]!;
  const chunks: Array<GenerateChunk & { at: number }> = [];
  const done = (async () => {
    for await (const chunk of client.direct<GenerateChunk>(
      { token_ids: prompt, stop_conditions: { max_tokens: maxTokens }, sampling_options: {}, output_options: {} },
      id,
    )) {
      chunks.push({ ...chunk, at: performance.now() });
    }
  })();
  return { chunks, done };
}

const healthStatus = async () => (await fetch(`${base}/health`)).status;

describe('engine controls on the sample engine', () => {
  it('answers unknown controls 404, bad JSON 400 and a non-object body with a 200 refusal, as stock does', async () => {
    expect(await control('teleport', '{}')).toEqual({ status: 404, body: { error: 'Route not found', message: 'Route /engine/control/teleport not found' } });
    expect(await control('sleep', '{"level":')).toMatchObject({ status: 400, body: { error: 'Invalid JSON' } });
    expect(await control('sleep', '[1]')).toEqual({ status: 200, body: { status: 'error', message: 'engine control request body must be a JSON object' } });
    expect(await control('pause_generation', '{"mode":"later"}')).toEqual({
      status: 200,
      body: { status: 'error', message: "Invalid mode 'later'; expected keep|wait|abort" },
    });
    // A refused pause took the worker out of discovery first, as stock's worker does; resume puts it back.
    expect(await control('resume_generation')).toEqual({ status: 200, body: { status: 'ok', message: 'Engine resumed' } });
    await waitFor('the worker back in discovery', () => client.instanceIds().length === 1, 10_000);
    expect(await healthStatus()).toBe(200);
  });

  it('sleep leaves discovery and holds the stream until wake_up; then the stream finishes whole', async () => {
    const { chunks, done } = stream(30);
    await waitFor('the first tokens', () => chunks.length >= 3, 10_000);
    expect(await control('sleep', '{"level":1}')).toEqual({ status: 200, body: { status: 'ok', message: 'Engine slept (level=1)', is_sleeping: true } });
    expect(await healthStatus()).toBe(503);
    await waitFor('the worker to leave discovery', () => client.instanceIds().length === 0, 10_000);
    const asleepAt = performance.now();
    const before = chunks.length;
    await new Promise((r) => setTimeout(r, 500));
    // At most the tokens already on their way when the engine fell asleep.
    expect(chunks.length - before).toBeLessThanOrEqual(2);
    expect(await control('sleep')).toMatchObject({ status: 200, body: { message: 'Engine already sleeping' } });

    expect(await control('wake_up')).toEqual({ status: 200, body: { status: 'ok', message: 'Engine woke up', is_sleeping: false } });
    await done;
    expect(chunks).toHaveLength(30);
    expect(chunks.at(-1)).toMatchObject({ finish_reason: 'length' });
    expect(chunks.filter((c) => c.at > asleepAt + 400).length).toBeGreaterThan(10);
    await waitFor('the worker back in discovery', () => client.instanceIds().length === 1, 10_000);
    expect(await healthStatus()).toBe(200);
  }, 30_000);

  it('pause_generation in abort mode ends running streams as cancelled; resume serves new ones', async () => {
    const { chunks, done } = stream(100);
    await waitFor('the first tokens', () => chunks.length >= 2, 10_000);
    expect(await control('pause_generation', '{"mode":"abort"}')).toEqual({ status: 200, body: { status: 'ok', message: 'Engine paused' } });
    await done;
    expect(chunks.at(-1)).toMatchObject({ finish_reason: 'cancelled' });
    expect(chunks.length).toBeLessThan(100);
    await control('resume_generation');
    await waitFor('the worker back in discovery', () => client.instanceIds().length === 1, 10_000);
    const next = stream(3);
    await next.done;
    expect(next.chunks.map((c) => c.finish_reason ?? null)).toEqual([null, null, 'length']);
  }, 30_000);

  it('pause_generation in wait mode replies once running streams finished', async () => {
    const { chunks, done } = stream(10);
    await waitFor('the first token', () => chunks.length >= 1, 10_000);
    const paused = await control('pause_generation', '{"mode":"wait"}');
    const pausedAt = performance.now();
    expect(paused).toEqual({ status: 200, body: { status: 'ok', message: 'Engine paused' } });
    await done;
    // The running stream went on to its end, and the reply waited for it.
    expect(chunks).toHaveLength(10);
    expect(chunks.at(-1)).toMatchObject({ finish_reason: 'length' });
    // Nine more tokens 40 ms apart: a pause that did not wait would have answered at once.
    expect(pausedAt - chunks[0]!.at).toBeGreaterThan(250);
    await control('resume_generation');
    await waitFor('the worker back in discovery', () => client.instanceIds().length === 1, 10_000);
  }, 30_000);

  it('clear_kv_blocks drops the simulated cache, answering as stock engines do', async () => {
    await stream(
      2,
      Array.from({ length: 48 }, (_, i) => 100 + i),
    ).done;
    expect(await control('clear_kv_blocks')).toEqual({ status: 200, body: { status: 'success', message: 'KV cache cleared' } });
    await waitFor('the clear to be logged', () => worker.stderr().includes('"msg":"KV cache cleared"'), 10_000);
    expect(worker.stderr()).toMatch(/"blocks":[1-9]\d*,"msg":"KV cache cleared"/);
  });
});

// An operator drains one of two sample-engine workers and resumes it while our frontend is under
// steady load: no request fails, the drained worker gets none while drained, and traffic comes
// back to it after /engine/resume.
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { Deployment, post, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const MODEL = 'qwen3-drain';
let deployment: Deployment;
let url: string;
const admin: string[] = [];

/** Requests served so far by the worker whose system port is `base`, from its /metrics. */
async function served(base: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('dynamo_component_requests_total{') && l.includes('dynamo_endpoint="generate"'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

async function adminCall(base: string, route: string, method = 'POST', body: unknown = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${base}/engine/${route}`, { method, ...(method === 'GET' ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: JSON.parse(await res.text()) as Record<string, unknown> };
}

beforeAll(async () => {
  deployment = await Deployment.start(SETUPS[0]!);
  ({ url } = await deployment.frontend());
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    admin.push(`http://127.0.0.1:${port}`);
    deployment.sampleWorker(['--model-name', MODEL, '--delay-ms', '5'], {
      DYN_SYSTEM_PORT: String(port),
      DYN_SYSTEM_HOST: '127.0.0.1',
      DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS: '2',
    });
  }
  await waitForModel(url, MODEL, 'sample', 2);
}, 60_000);
afterAll(async () => {
  await deployment?.stop();
});

describe('drain and resume a worker (/engine/drain, /engine/resume)', () => {
  it('under load: no request fails, the drained worker gets none until resumed, then gets traffic again', async () => {
    const [a, b] = admin as [string, string];
    const failures: string[] = [];
    let completed = 0;
    let running = true;
    // Eight clients in closed loops, each request streaming 8 tokens 5 ms apart.
    const clients = Array.from({ length: 8 }, async () => {
      while (running) {
        const res = await post(url, '/v1/completions', { model: MODEL, prompt: 'drain me', max_tokens: 8 });
        const text = await res.text();
        if (res.status !== 200) failures.push(`${res.status} ${text}`);
        else completed++;
      }
    });
    await waitFor('requests on both workers', async () => (await served(a)) > 5 && (await served(b)) > 5, 20_000);

    const drained = await adminCall(a, 'drain', 'POST', { timeout_secs: 20 });
    expect(drained).toEqual({ status: 200, body: { status: 'ok', state: 'drained', inflight: 0, message: 'worker drained' } });
    expect(await adminCall(a, 'drain', 'GET')).toEqual({ status: 200, body: { status: 'ok', state: 'drained', inflight: 0 } });
    expect((await fetch(`${a}/health`)).status).toBe(503);
    const atDrained = await served(a);
    const bAtDrained = await served(b);
    await waitFor('B to serve 40 more requests', async () => (await served(b)) > bAtDrained + 40, 20_000);
    expect(await served(a)).toBe(atDrained);

    expect(await adminCall(a, 'resume')).toMatchObject({ status: 200, body: { status: 'ok', state: 'serving', message: 'worker resumed' } });
    await waitFor('A to get requests again', async () => (await served(a)) > atDrained + 5, 20_000);
    expect((await fetch(`${a}/health`)).status).toBe(200);
    expect(await adminCall(a, 'resume')).toMatchObject({ status: 200, body: { message: 'worker already serving' } });

    running = false;
    await Promise.all(clients);
    expect(failures).toEqual([]);
    expect(completed).toBeGreaterThan(50);
  }, 90_000);

  it('refuses a bad drain body, naming the field, and leaves the worker serving', async () => {
    const [a] = admin as [string];
    expect(await adminCall(a, 'drain', 'POST', { timeout_secs: 'soon' })).toMatchObject({
      status: 200,
      body: { status: 'error', message: expect.stringContaining('[timeout_secs]') },
    });
    expect(await adminCall(a, 'drain', 'GET')).toMatchObject({ body: { state: 'serving' } });
  });
});

// dynamo-llama-cpp behind dynamo-frontend on file discovery, with a prompt whose evaluation takes
// longer than the discovery TTL: the worker stays registered throughout (its record's touches do
// not wait behind llama.cpp on the libuv pool) and answers a request sent meanwhile.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { Child } from '@dynamo/testing/child';
import { Deployment, post, waitForModel } from '@dynamo/testing/frontend-stack';

import { smolLm2 } from '../../../scripts/test-model.mjs';

const cli = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'dist', 'cli.cjs');
const MODEL = 'smollm2';
const TTL_SECS = 3;

let deployment: Deployment;
let worker: Child;
let url = '';

beforeAll(async () => {
  const modelPath = await smolLm2();
  deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, { DYN_FILE_KV_TTL_SECS: String(TTL_SECS) });
  // One llama.cpp thread: the evaluation is as slow as it gets, on any machine.
  worker = deployment.nodeProcess([cli, '--model-path', modelPath, '--model-name', MODEL, '--parallel', '2', '--context-size', '2048', '--threads', '1']);
  ({ url } = await deployment.frontend());
  await waitForModel(url, MODEL, 'llama', 1, 120_000);
}, 180_000);
afterAll(() => deployment.stop());

describe('a prompt that takes longer to evaluate than the discovery TTL', () => {
  it('leaves the worker listed throughout, and answers a request sent meanwhile', async () => {
    const long = 'The quick brown fox jumps over the lazy dog. '.repeat(170);
    const started = Date.now();
    const answer = post(url, '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: long }], max_tokens: 1 });
    let done = false;
    void answer.finally(() => (done = true));
    await new Promise((r) => setTimeout(r, 500));
    const other = post(url, '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
    const listings: boolean[] = [];
    while (!done) {
      const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      listings.push(models.data.some((m) => m.id === MODEL));
      await new Promise((r) => setTimeout(r, 250));
    }
    const res = await answer;
    expect(res.status, await res.clone().text()).toBe(200);
    const took = (Date.now() - started) / 1000;
    // The point of the test: the evaluation outlasted the TTL (else it shows nothing).
    expect(took, 'the long prompt was evaluated within the TTL: make it longer').toBeGreaterThan(TTL_SECS * 2);
    expect(listings.every(Boolean), `listed at each check: ${listings.join(' ')}`).toBe(true);
    expect((await other).status).toBe(200);
    expect(worker.stderr() + worker.lines.join('\n')).not.toMatch(/removed as expired/);
  });
});

// A real sample-engine worker at zero delay has many tokens ready in one turn of its event loop:
// they leave in one frame (one item), as stock's engines send them, after a first item that
// leaves alone. The caller sees the same tokens, finish reason and usage as the engine made.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Context, type GenerateChunk } from '@dynamo/backend';
import { DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';
import { type Child, startChild } from '@dynamo/testing/child';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SampleEngine } from '../src/index.js';

const cli = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');
const kvDir = mkdtempSync(join(tmpdir(), 'sample-frames-'));
const env = { DYN_DISCOVERY_BACKEND: 'file', DYN_FILE_KV: kvDir, DYN_REQUEST_PLANE: 'tcp', DYN_LOG: 'info' };

let worker: Child;
let caller: DistributedRuntime;

beforeAll(async () => {
  worker = startChild(process.execPath, [cli, '--model-path', qwen3ModelDir(), '--delay-ms', '0'], env);
  caller = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, DYN_LOG: 'error' }) });
}, 60_000);
afterAll(async () => {
  worker?.kill();
  await caller?.shutdown();
  rmSync(kvDir, { recursive: true, force: true });
});

describe('a worker whose engine has several tokens ready at once', () => {
  it('sends them as one item after the first, with the tokens, finish reason and usage the engine made', async () => {
    const client = await caller.endpoint('dynamo.sample.generate').client();
    await client.waitForInstances({ timeoutMs: 30_000 });
    const request = { token_ids: [5, 6, 7], stop_conditions: { max_tokens: 200 }, sampling_options: {}, output_options: {} };
    const items: GenerateChunk[] = [];
    for await (const item of client.generate<GenerateChunk>(request)) items.push(item);

    const engine = new SampleEngine({ delayMs: 0 });
    const made: GenerateChunk[] = [];
    for await (const chunk of engine.generate(request, new Context())) made.push(chunk);

    expect(items[0]).toEqual(made[0]);
    expect(items.flatMap((item) => item.token_ids)).toEqual(made.flatMap((chunk) => chunk.token_ids));
    expect(items.at(-1)).toMatchObject({ finish_reason: 'length', completion_usage: made.at(-1)!.completion_usage });
    expect(made).toHaveLength(200);
    // A turn holds tens of tokens; even a slow, shared machine merges most of them.
    expect(items.length).toBeLessThan(made.length / 2);
  });
});

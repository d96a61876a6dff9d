// The disaggregated graph under dynamo-serve: a request to Prefill runs the prompt on the
// prefill engine, then Decode (two processes) continues from the handed-over state.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';
import { serviceClient } from '@dynamo/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type ServeProcess, startServe } from '@dynamo/testing/dynamo-serve';
import { Decode, Prefill, type TokenChunk } from '../src/disagg.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const kv = mkdtempSync(join(tmpdir(), 'sdk-disagg-'));
const env = { DYN_FILE_KV: kv, DYN_DISCOVERY_BACKEND: undefined, DYN_REQUEST_PLANE: undefined, DYN_DISABLE_AUTO_GPU_ALLOCATION: '1' };

describe('sdk-disagg under dynamo-serve', () => {
  let serve: ServeProcess;
  let runtime: DistributedRuntime;

  beforeAll(async () => {
    serve = startServe(['src/disagg.ts#Prefill', '--Decode.delayMs=0', '--Prefill.delayMs=0'], env, root);
    await serve.ready();
    runtime = await DistributedRuntime.create({ config: loadRuntimeConfig({ DYN_FILE_KV: kv, DYN_LOG: 'error' }) });
  }, 90_000);
  afterAll(async () => {
    await runtime?.shutdown();
    if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
    rmSync(kv, { recursive: true, force: true });
  });

  it('starts Prefill and two Decode workers', async () => {
    expect([...(await serve.ready()).keys()].sort()).toEqual(['Decode#1', 'Decode#2', 'Prefill#1']);
  });

  it('Prefill.generate hands its result to Decode.generate, which streams the tokens', async () => {
    const chunks: TokenChunk[] = [];
    for await (const chunk of serviceClient(Prefill, runtime).generate({ token_ids: [5, 6, 7], max_tokens: 4 })) chunks.push(chunk);
    expect(chunks.map((c) => c.stage)).toEqual(['prefill', 'decode', 'decode', 'decode', 'decode']);
    expect(chunks.flatMap((c) => c.token_ids)).toEqual([1, 2, 3, 4]);
    expect(chunks.at(-1)!.finish_reason).toBe('length');
  });

  it('a Decode worker refuses a request without the prefill state, and keeps serving', async () => {
    const decode = serviceClient(Decode, runtime);
    await expect(async () => {
      for await (const _ of decode.generate({ token_ids: [1], max_tokens: 2 })) void _;
    }).rejects.toThrow(/requires request\.prefill_result/);
    const again: TokenChunk[] = [];
    for await (const chunk of serviceClient(Prefill, runtime).generate({ token_ids: [1], max_tokens: 2 })) again.push(chunk);
    expect(again.flatMap((c) => c.token_ids)).toEqual([1, 2]);
  });

  it('SIGTERM stops the graph and exits 0', async () => {
    serve.child.kill('SIGTERM');
    expect((await serve.exited).code).toBe(0);
  });
});

// Where dynamo-llama-cpp finds its GGUF: a file, a folder, or a Hugging Face repo of GGUF files
// (here a local fake of the Hub), where --gguf-file picks one quantization and only it is fetched.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type HubServer, startHubServer } from '@dynamo/testing/hub-server';
import { resolveGguf } from '../src/gguf-path.js';

const fixtures = join(import.meta.dirname, '..', '..', '..', 'crates', 'dynamo-llm-core', 'tests', 'fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'gguf-path-'));
const repo = join(tmp, 'repo');
const SHA = '4444555566667777888899990000111122223333';
let hub: HubServer;
const env = () => ({ HF_HOME: join(tmp, 'hf'), HF_ENDPOINT: hub.url, HF_HUB_DISABLE_PROGRESS_BARS: '1' });

beforeAll(async () => {
  mkdirSync(repo);
  writeFileSync(join(repo, 'README.md'), '# quantizations\n');
  for (const file of ['qwen3-tiny.gguf', 'llama-tiny.gguf']) copyFileSync(join(fixtures, file), join(repo, file));
  hub = await startHubServer({ repos: { 'Quant/Tiny-GGUF': { main: { sha: SHA, dir: repo } } } });
});
afterAll(async () => {
  await hub.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe('resolveGguf', () => {
  it('takes a file as it is, and the only or the named .gguf of a folder', async () => {
    expect(await resolveGguf(join(fixtures, 'llama-tiny.gguf'))).toBe(join(fixtures, 'llama-tiny.gguf'));
    expect(await resolveGguf(repo, 'qwen3-tiny.gguf')).toBe(join(repo, 'qwen3-tiny.gguf'));
    await expect(resolveGguf(repo)).rejects.toThrow(
      `--model-path ${repo} holds several .gguf files (llama-tiny.gguf, qwen3-tiny.gguf): pick one with --gguf-file`,
    );
    await expect(resolveGguf(repo, 'q8.gguf')).rejects.toThrow(`--gguf-file q8.gguf is not in ${repo} (it has: llama-tiny.gguf, qwen3-tiny.gguf)`);
    await expect(resolveGguf(join(fixtures, 'llama-tiny.gguf'), 'x.gguf')).rejects.toThrow('--gguf-file picks a file inside a folder or repo');
  });

  it('downloads the --gguf-file of a Hugging Face repo alone, into the Hugging Face cache', async () => {
    const path = await resolveGguf('Quant/Tiny-GGUF', 'llama-tiny.gguf', env());
    const snapshot = join(tmp, 'hf', 'hub', 'models--Quant--Tiny-GGUF', 'snapshots', SHA);
    expect(path).toBe(join(snapshot, 'llama-tiny.gguf'));
    expect(readdirSync(snapshot)).toEqual(['llama-tiny.gguf']);
    await expect(resolveGguf('Quant/Tiny-GGUF', undefined, env())).rejects.toThrow(
      /pick one of llama-tiny.gguf, qwen3-tiny.gguf \(the ggufFile option; dynamo-llama-cpp --gguf-file\)/,
    );
  });

  it('says what --model-path may be when it is nothing of the kind', async () => {
    await expect(resolveGguf('./no/such.gguf', undefined, env())).rejects.toThrow(
      '--model-path ./no/such.gguf: no such file or folder, and not a Hugging Face repo id',
    );
  });
});

// LoRA adapter sources as the worker resolves them before an engine loads one: local files in
// place, hf:// repos downloaded (from a local stand-in for the Hub) into the cache folder (the worker's DYN_LORA_PATH).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { InvalidArgument } from '@dynamo/runtime';
import { silentLog } from '@dynamo/runtime/internal';
import { startHubServer, type HubServer } from '@dynamo/testing/hub-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loraCacheDir, resolveLoraSource } from '../src/internal.js';

const ADAPTER = Buffer.from('GGUF-adapter-bytes-for-the-test');
let root: string;
let hub: HubServer;
let env: Record<string, string>;
let cacheDir: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'lora-source-'));
  const repo = join(root, 'repo');
  mkdirSync(repo);
  writeFileSync(join(repo, 'pirate-lora.gguf'), ADAPTER);
  writeFileSync(join(repo, 'README.md'), '# pirate\n');
  hub = await startHubServer({ repos: { 'Adapters/Pirate-GGUF': { main: { sha: 'a1'.repeat(20), dir: repo } } } });
  env = { HOME: join(root, 'home'), HF_ENDPOINT: hub.url };
  cacheDir = join(root, 'loras');
});
afterAll(async () => {
  await hub?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('resolveLoraSource', () => {
  it('takes a local file or folder in place, as a path or a file:// URI', async () => {
    const local = join(root, 'local-adapter');
    mkdirSync(local, { recursive: true });
    expect(await resolveLoraSource(local, { env })).toBe(pathToFileURL(local).href);
    expect(await resolveLoraSource(pathToFileURL(local).href, { env })).toBe(pathToFileURL(local).href);
    await expect(resolveLoraSource(`file://${root}/missing`, { env })).rejects.toThrow(`LoRA source file://${root}/missing: no such file or folder`);
  });

  it('downloads an hf:// adapter into the cache folder once, and names a missing repo', async () => {
    const uri = await resolveLoraSource('hf://Adapters/Pirate-GGUF', { env, cacheDir, log: silentLog });
    const path = fileURLToPath(uri);
    expect(path.startsWith(join(root, 'loras'))).toBe(true);
    expect(path.endsWith('pirate-lora.gguf')).toBe(true);
    expect(readFileSync(path)).toEqual(ADAPTER);
    const served = hub.requests.length;
    expect(await resolveLoraSource('hf://Adapters/Pirate-GGUF', { env: { ...env, HF_HUB_OFFLINE: '1' }, cacheDir })).toBe(uri);
    expect(hub.requests.length).toBe(served);
    const missing = resolveLoraSource('hf://Adapters/Nobody', { env, cacheDir, log: silentLog });
    await expect(missing).rejects.toBeInstanceOf(InvalidArgument);
    await expect(missing).rejects.toThrow(/^LoRA source hf:\/\/Adapters\/Nobody: /);
  });

  it('refuses schemes it cannot fetch, naming the scheme', async () => {
    await expect(resolveLoraSource('s3://bucket/adapter', { env })).rejects.toThrow('LoRA source s3://bucket/adapter: the s3:// scheme is not supported');
  });

  it('keeps adapters where stock does by default', () => {
    expect(loraCacheDir({ HOME: '/home/u' })).toBe('/home/u/.cache/dynamo_loras');
    expect(loraCacheDir({})).toBe('/tmp/.cache/dynamo_loras');
  });
});

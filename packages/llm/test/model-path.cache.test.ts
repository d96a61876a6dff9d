import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgument } from '@dynamo/runtime';
import { resolveModelPath } from '../src/model-path/index.js';

const REPO = 'Qwen/Qwen3-0.6B';
const COMMIT = 'e6de91484c29aa9480d55605af694f39b081c455';
// Port 9 (discard) on loopback: nothing listens, so any network use would fail the test.
const CLOSED = 'http://127.0.0.1:9';

let home: string;
let repoDir: string;

/** Lays out a cached repo the way huggingface_hub writes it: blobs, snapshot symlinks, refs. */
function cacheRepo(files: Record<string, string>, ref: string | undefined = 'main', commit = COMMIT): string {
  const snapshot = join(repoDir, 'snapshots', commit);
  mkdirSync(join(repoDir, 'blobs'), { recursive: true });
  mkdirSync(snapshot, { recursive: true });
  let n = 0;
  for (const [name, content] of Object.entries(files)) {
    const etag = (n++).toString(16).padStart(40, '0');
    writeFileSync(join(repoDir, 'blobs', etag), content);
    symlinkSync(`../../blobs/${etag}`, join(snapshot, name));
  }
  if (ref) {
    mkdirSync(join(repoDir, 'refs'), { recursive: true });
    writeFileSync(join(repoDir, 'refs', ref), commit);
  }
  return snapshot;
}

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'hf-home-'));
  repoDir = join(home, 'hub', 'models--Qwen--Qwen3-0.6B');
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

describe('the Hugging Face cache', () => {
  it('finds a cached model with no Hub reachable', async () => {
    const snapshot = cacheRepo({ 'config.json': '{"model_type":"qwen3"}', 'tokenizer.json': '{}' });
    const resolved = await resolveModelPath(REPO, { env: { HF_HOME: home, HF_ENDPOINT: CLOSED }, progress: 'none' });
    expect(resolved).toEqual({ kind: 'dir', path: snapshot, repoId: REPO, revision: COMMIT, defaultName: REPO });
  });

  it('finds a cached model with HF_HUB_OFFLINE=1', async () => {
    const snapshot = cacheRepo({ 'config.json': '{}' });
    const resolved = await resolveModelPath(`hf://${REPO}`, { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' }, progress: 'none' });
    expect(resolved.path).toBe(snapshot);
  });

  it('uses HF_HUB_CACHE over HF_HOME', async () => {
    const cache = join(home, 'elsewhere');
    repoDir = join(cache, 'models--Qwen--Qwen3-0.6B');
    const snapshot = cacheRepo({ 'config.json': '{}' });
    const resolved = await resolveModelPath(REPO, { env: { HF_HOME: join(home, 'unused'), HF_HUB_CACHE: cache, HF_HUB_OFFLINE: '1' }, progress: 'none' });
    expect(resolved.path).toBe(snapshot);
  });

  it('finds a snapshot by commit hash without a ref', async () => {
    const snapshot = cacheRepo({ 'config.json': '{}' }, undefined);
    const resolved = await resolveModelPath(`${REPO}@${COMMIT}`, { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' }, progress: 'none' });
    expect(resolved.path).toBe(snapshot);
  });

  it('under HF_HUB_OFFLINE=1 with an empty cache names the cache folder and the variable', async () => {
    const err = await resolveModelPath(REPO, { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' }, progress: 'none' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toContain(`model '${REPO}' (revision 'main') is not in the Hugging Face cache at ${repoDir}`);
    expect((err as Error).message).toContain('HF_HUB_OFFLINE');
  });

  it('does not count a snapshot without config.json as cached', async () => {
    cacheRepo({ 'tokenizer.json': '{}' });
    await expect(resolveModelPath(REPO, { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' }, progress: 'none' })).rejects.toThrow(/not in the Hugging Face cache/);
  });

  it('does not count a snapshot whose blob is gone as cached', async () => {
    cacheRepo({ 'config.json': '{}' });
    rmSync(join(repoDir, 'blobs'), { recursive: true });
    await expect(resolveModelPath(REPO, { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' }, progress: 'none' })).rejects.toThrow(/not in the Hugging Face cache/);
  });

  it('asks for weights only when ignoreWeights is false, and then wants every shard of the index', async () => {
    const index = JSON.stringify({ weight_map: { a: 'model-00001-of-00002.safetensors', b: 'model-00002-of-00002.safetensors' } });
    cacheRepo({ 'config.json': '{}', 'model.safetensors.index.json': index, 'model-00001-of-00002.safetensors': 'w1' });
    const env = { HF_HOME: home, HF_HUB_OFFLINE: '1' };
    await expect(resolveModelPath(REPO, { env, progress: 'none' })).resolves.toMatchObject({ revision: COMMIT });
    await expect(resolveModelPath(REPO, { env, ignoreWeights: false, progress: 'none' })).rejects.toThrow(/with weights\) is not in the Hugging Face cache/);
    writeFileSync(join(repoDir, 'snapshots', COMMIT, 'model-00002-of-00002.safetensors'), 'w2');
    await expect(resolveModelPath(REPO, { env, ignoreWeights: false, progress: 'none' })).resolves.toMatchObject({ revision: COMMIT });
  });

  it('reads the files through the snapshot symlinks', async () => {
    const snapshot = cacheRepo({ 'config.json': '{"a":1}' });
    const resolved = await resolveModelPath(REPO, { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' }, progress: 'none' });
    expect(readFileSync(join(resolved.path, 'config.json'), 'utf8')).toBe('{"a":1}');
    expect(resolved.path).toBe(snapshot);
  });
});

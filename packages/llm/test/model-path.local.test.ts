import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { InvalidArgument } from '@dynamo/runtime';
import { loadHfEnv, parseRepoRef, resolveModelPath } from '../src/model-path/index.js';

let tmp: string;
// A closed endpoint: a test that reaches the network by mistake fails instead of downloading.
const env = (extra: Record<string, string> = {}) => ({ HF_ENDPOINT: 'http://127.0.0.1:9', HF_HUB_OFFLINE: '1', ...extra });

beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), 'model-path-local-'));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe('local model paths', () => {
  it('resolves an existing directory to kind dir, named after the folder', async () => {
    const dir = join(tmp, 'Qwen3-0.6B');
    mkdirSync(dir);
    writeFileSync(join(dir, 'config.json'), '{}');
    expect(await resolveModelPath(dir, { env: env() })).toEqual({ kind: 'dir', path: dir, defaultName: 'Qwen3-0.6B' });
  });

  it('resolves a relative directory to an absolute path', async () => {
    const dir = join(tmp, 'rel-model');
    mkdirSync(dir);
    const cwd = process.cwd();
    process.chdir(tmp);
    try {
      expect((await resolveModelPath('rel-model', { env: env() })).path).toBe(dir);
    } finally {
      process.chdir(cwd);
    }
  });

  it('prefers a local directory named like a repo id over the Hub', async () => {
    mkdirSync(join(tmp, 'Org', 'Name'), { recursive: true });
    const cwd = process.cwd();
    process.chdir(tmp);
    try {
      const resolved = await resolveModelPath('Org/Name', { env: env() });
      expect(resolved).toMatchObject({ kind: 'dir', path: join(tmp, 'Org', 'Name'), defaultName: 'Name' });
      expect(resolved.repoId).toBeUndefined();
    } finally {
      process.chdir(cwd);
    }
  });

  it('resolves a .gguf file to kind gguf, named after the file without extension', async () => {
    const file = join(tmp, 'qwen3-0.6b-q4_k_m.gguf');
    writeFileSync(file, 'GGUF');
    expect(await resolveModelPath(file, { env: env() })).toEqual({ kind: 'gguf', path: file, defaultName: 'qwen3-0.6b-q4_k_m' });
  });

  it('rejects an existing file that is not a .gguf, naming the path', async () => {
    const file = join(tmp, 'model.safetensors');
    writeFileSync(file, 'x');
    const err = await resolveModelPath(file, { env: env() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toContain(file);
    expect((err as Error).message).toContain('not a .gguf');
  });

  it('rejects a path that is neither on disk nor a repo id', async () => {
    for (const input of [join(tmp, 'missing'), './nope', 'a/b/c', 'just-a-name', 'Org/Na me']) {
      const err = await resolveModelPath(input, { env: env() }).catch((e: unknown) => e);
      expect(err, input).toBeInstanceOf(InvalidArgument);
      expect((err as Error).message).toContain(`model path '${input}' is neither an existing file or directory`);
    }
  });

  it('rejects an empty model path', async () => {
    await expect(resolveModelPath('', { env: env() })).rejects.toBeInstanceOf(InvalidArgument);
  });

  it('names a Hugging Face cache snapshot given by path after its repo', async () => {
    const commit = 'c'.repeat(40);
    const snap = join(tmp, 'hub', 'models--Qwen--Qwen3-0.6B', 'snapshots', commit);
    mkdirSync(snap, { recursive: true });
    expect(await resolveModelPath(snap, { env: env() })).toEqual({
      kind: 'dir',
      path: snap,
      repoId: 'Qwen/Qwen3-0.6B',
      revision: commit,
      defaultName: 'Qwen/Qwen3-0.6B',
    });
  });

  it('follows a symlinked directory without replacing the path given', async () => {
    const real = join(tmp, 'real');
    mkdirSync(real);
    symlinkSync(real, join(tmp, 'link'));
    expect(await resolveModelPath(join(tmp, 'link'), { env: env() })).toMatchObject({ kind: 'dir', path: join(tmp, 'link'), defaultName: 'link' });
  });
});

describe('repo ids', () => {
  it('parses Org/Name, hf://Org/Name and @revision', () => {
    expect(parseRepoRef('Qwen/Qwen3-0.6B')).toEqual({ repoId: 'Qwen/Qwen3-0.6B', revision: undefined, explicit: false });
    expect(parseRepoRef('hf://Qwen/Qwen3-0.6B@v1.0')).toEqual({ repoId: 'Qwen/Qwen3-0.6B', revision: 'v1.0', explicit: true });
    for (const bad of ['Qwen', 'a/b/c', '/abs/path', './rel/x', 'Org/-x', 'Org/a--b', 'Org/x.git', 'Org/x@']) {
      expect(parseRepoRef(bad), bad).toBeUndefined();
    }
  });

  it('rejects a revision given two different ways', async () => {
    await expect(resolveModelPath('Org/Name@v1', { env: env(), revision: 'v2' })).rejects.toThrow(/names revision 'v1' but options.revision is 'v2'/);
  });

  it('rejects a revision that would escape the cache folder', async () => {
    await expect(resolveModelPath('Org/Name', { env: env(), revision: '../../etc' })).rejects.toThrow(/not a branch, tag or commit hash/);
  });
});

describe('Hugging Face settings', () => {
  it('defaults to ~/.cache/huggingface/hub and https://huggingface.co', () => {
    const hf = loadHfEnv({ HOME: '/home/u' });
    expect(hf).toMatchObject({
      home: '/home/u/.cache/huggingface',
      hubCache: '/home/u/.cache/huggingface/hub',
      endpoint: 'https://huggingface.co',
      offline: false,
    });
    expect(hf.tokenPath).toBe('/home/u/.cache/huggingface/token');
  });

  it('honours HF_HOME, HF_HUB_CACHE, XDG_CACHE_HOME and a trailing slash on HF_ENDPOINT', () => {
    expect(loadHfEnv({ HOME: '/h', XDG_CACHE_HOME: '/xdg' }).hubCache).toBe('/xdg/huggingface/hub');
    expect(loadHfEnv({ HOME: '/h', HF_HOME: '~/hf' }).hubCache).toBe('/h/hf/hub');
    expect(loadHfEnv({ HF_HOME: '/hf', HF_HUB_CACHE: '/cache' }).hubCache).toBe('/cache');
    expect(loadHfEnv({ HF_ENDPOINT: 'https://mirror.example/' }).endpoint).toBe('https://mirror.example');
    expect(loadHfEnv({ HF_HUB_OFFLINE: 'YES' }).offline).toBe(true);
  });

  it('rejects bad values naming the variable, never the token', () => {
    expect(() => loadHfEnv({ HF_ENDPOINT: 'ftp://x', HF_HUB_OFFLINE: 'maybe', HF_TOKEN: 'hf_secret' })).toThrow(/HF_ENDPOINT: .*HF_HUB_OFFLINE: expected/);
    expect(() => loadHfEnv({ HF_HUB_OFFLINE: 'maybe', HF_TOKEN: 'hf_secret' })).not.toThrow(/hf_secret/);
  });
});

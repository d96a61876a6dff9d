import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CannotConnect, InvalidArgument, createLogging } from '@dynamo/runtime';
import type { Log } from '@dynamo/runtime';
import { resolveModelPath } from '../src/model-path/index.js';
import { startHubServer, writeModelRepo, type HubServer, type ModelRepoFiles } from '@dynamo/testing/hub-server';
import { QWEN3_TOKENIZER_JSON as QWEN_TOKENIZER_JSON } from '@dynamo/testing/qwen3-model';

const REPO = 'Qwen/Qwen3-Tiny';
const MAIN = '1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c';
const V1 = '0a1b2c3d4e5f60718293a4b5c6d7e8f901234567';
const PRIVATE = 'Secret/Model';
const PRIVATE_SHA = 'ffffeeeeddddccccbbbbaaaa9999888877776666';
const CARD_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'];
const GGUF_REPO = 'Quant/Tiny-GGUF';
const GGUF_SHA = '2222333344445555666677778888999900001111';
const SOLO_REPO = 'Quant/Solo-GGUF';
const SOLO_SHA = '3333444455556666777788889999000011112222';
const crateFixtures = join(import.meta.dirname, '..', '..', '..', 'crates', 'dynamo-llm-core', 'tests', 'fixtures');

let fixtures: string;
let main: ModelRepoFiles;
let v1: ModelRepoFiles;
let hub: HubServer;
let home: string;

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const env = (extra: Record<string, string> = {}) => ({ HF_HOME: home, HF_ENDPOINT: hub.url, ...extra });
const quiet = { progress: 'none' as const };

beforeAll(async () => {
  fixtures = mkdtempSync(join(tmpdir(), 'hub-fixtures-'));
  main = writeModelRepo(join(fixtures, 'main'));
  v1 = writeModelRepo(join(fixtures, 'v1'), { max_position_embeddings: 1024 });
  const secret = writeModelRepo(join(fixtures, 'secret'));
  // Repos of GGUF files as quantizers publish them: no config.json, a README, one file per quantization.
  for (const [name, files] of [
    ['ggufs', ['qwen3-tiny.gguf', 'llama-tiny.gguf']],
    ['solo', ['qwen3-tiny.gguf']],
  ] as const) {
    mkdirSync(join(fixtures, name));
    writeFileSync(join(fixtures, name, 'README.md'), '# quantizations\n');
    for (const file of files) copyFileSync(join(crateFixtures, file), join(fixtures, name, file));
  }
  hub = await startHubServer({
    repos: {
      [REPO]: { main: { sha: MAIN, dir: main.dir }, v1: { sha: V1, dir: v1.dir } },
      [PRIVATE]: { main: { sha: PRIVATE_SHA, dir: secret.dir } },
      [GGUF_REPO]: { main: { sha: GGUF_SHA, dir: join(fixtures, 'ggufs') } },
      [SOLO_REPO]: { main: { sha: SOLO_SHA, dir: join(fixtures, 'solo') } },
    },
  });
});
afterAll(async () => {
  await hub.close();
  rmSync(fixtures, { recursive: true, force: true });
});
beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), 'hf-home-'));
  hub.requests.length = 0;
});
afterEach(() => rmSync(home, { recursive: true, force: true }));

describe('downloading from the Hub', () => {
  it('downloads the card files into an empty cache in the huggingface_hub layout', async () => {
    const resolved = await resolveModelPath(REPO, { env: env(), ...quiet });
    const repoDir = join(home, 'hub', 'models--Qwen--Qwen3-Tiny');
    const snapshot = join(repoDir, 'snapshots', MAIN);
    expect(resolved).toEqual({ kind: 'dir', path: snapshot, repoId: REPO, revision: MAIN, defaultName: REPO });
    expect(readFileSync(join(repoDir, 'refs', 'main'), 'utf8')).toBe(MAIN);
    expect(readdirSync(snapshot).sort()).toEqual(CARD_FILES);
    // Each snapshot file is a relative symlink into blobs/, named by ETag: the sha256 for LFS files.
    const link = readlinkSync(join(snapshot, 'tokenizer.json'));
    expect(link).toBe(`../../blobs/${sha256(readFileSync(QWEN_TOKENIZER_JSON))}`);
    expect(readFileSync(join(snapshot, 'tokenizer.json')).equals(readFileSync(QWEN_TOKENIZER_JSON))).toBe(true);
    expect(lstatSync(join(snapshot, 'config.json')).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(join(snapshot, 'config.json'), 'utf8'))).toEqual(main.config);
    // No partial or lock files left behind.
    expect(readdirSync(join(repoDir, 'blobs')).filter((f) => !/^[0-9a-f]{40}$|^[0-9a-f]{64}$/.test(f))).toEqual([]);
  });

  it('accepts hf:// and never asks for README, LICENSE, .gitattributes, images or weights', async () => {
    await resolveModelPath(`hf://${REPO}`, { env: env(), ...quiet });
    const asked = hub.requests.filter((r) => r.path.includes('/resolve/')).map((r) => r.path.split('/').pop());
    expect([...new Set(asked)].sort()).toEqual(CARD_FILES);
  });

  it('serves a second call from the cache without any request', async () => {
    const first = await resolveModelPath(REPO, { env: env(), ...quiet });
    hub.requests.length = 0;
    const second = await resolveModelPath(REPO, { env: env(), ...quiet });
    expect(second).toEqual(first);
    expect(hub.requests).toEqual([]);
  });

  it('downloads a revision other than main, sharing unchanged blobs', async () => {
    await resolveModelPath(REPO, { env: env(), ...quiet });
    hub.requests.length = 0;
    const resolved = await resolveModelPath(`${REPO}@v1`, { env: env(), ...quiet });
    expect(resolved).toMatchObject({ path: join(home, 'hub', 'models--Qwen--Qwen3-Tiny', 'snapshots', V1), revision: V1 });
    expect(JSON.parse(readFileSync(join(resolved.path, 'config.json'), 'utf8')).max_position_embeddings).toBe(1024);
    expect(readFileSync(join(home, 'hub', 'models--Qwen--Qwen3-Tiny', 'refs', 'v1'), 'utf8')).toBe(V1);
    // tokenizer.json is the same blob in both revisions: not fetched again.
    expect(hub.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/cdn/'))).toEqual([]);
    expect((await resolveModelPath(REPO, { env: env(), revision: 'v1', ...quiet })).path).toBe(resolved.path);
  });

  it('downloads the weights too when ignoreWeights is false', async () => {
    const resolved = await resolveModelPath(REPO, { env: env(), ignoreWeights: false, ...quiet });
    expect(readdirSync(resolved.path).sort()).toEqual([...CARD_FILES, 'model.safetensors'].sort());
    expect(readFileSync(join(resolved.path, 'model.safetensors')).equals(main.weights)).toBe(true);
    expect(existsSync(join(resolved.path, 'README.md'))).toBe(false);
    expect(existsSync(join(resolved.path, 'figures'))).toBe(false);
  });

  it('fetches the weights later for a cache that only holds the card files', async () => {
    await resolveModelPath(REPO, { env: env(), ...quiet });
    const resolved = await resolveModelPath(REPO, { env: env(), ignoreWeights: false, ...quiet });
    expect(readFileSync(join(resolved.path, 'model.safetensors')).equals(main.weights)).toBe(true);
  });

  it('shares one download between concurrent resolves of the same repo', async () => {
    const [a, b] = await Promise.all([resolveModelPath(REPO, { env: env(), ...quiet }), resolveModelPath(REPO, { env: env(), ...quiet })]);
    expect(a).toEqual(b);
    expect(readFileSync(join(a.path, 'tokenizer.json')).equals(readFileSync(QWEN_TOKENIZER_JSON))).toBe(true);
    expect(hub.requests.filter((r) => r.path.startsWith('/api/'))).toHaveLength(1);
    expect(hub.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/cdn/'))).toHaveLength(1);
  });

  it('keeps the cache whole when two revisions sharing blobs download at once', async () => {
    const [a, b] = await Promise.all([resolveModelPath(REPO, { env: env(), ...quiet }), resolveModelPath(`${REPO}@v1`, { env: env(), ...quiet })]);
    for (const r of [a, b]) expect(readFileSync(join(r.path, 'tokenizer.json')).equals(readFileSync(QWEN_TOKENIZER_JSON))).toBe(true);
    expect(hub.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/cdn/'))).toHaveLength(1);
  });
});

describe('repos of GGUF files', () => {
  it('downloads only the .gguf file ggufFile names, and serves it from the cache next time', async () => {
    const resolved = await resolveModelPath(GGUF_REPO, { env: env(), ggufFile: 'llama-tiny.gguf', ...quiet });
    const snapshot = join(home, 'hub', 'models--Quant--Tiny-GGUF', 'snapshots', GGUF_SHA);
    expect(resolved).toEqual({ kind: 'gguf', path: join(snapshot, 'llama-tiny.gguf'), repoId: GGUF_REPO, revision: GGUF_SHA, defaultName: GGUF_REPO });
    expect(readdirSync(snapshot)).toEqual(['llama-tiny.gguf']);
    expect(readFileSync(resolved.path).equals(readFileSync(join(crateFixtures, 'llama-tiny.gguf')))).toBe(true);
    hub.requests.length = 0;
    expect(await resolveModelPath(GGUF_REPO, { env: env(), ggufFile: 'llama-tiny.gguf', ...quiet })).toEqual(resolved);
    expect(hub.requests).toEqual([]);
  });

  it('takes the only .gguf of a repo without config.json, from the Hub and then from the cache', async () => {
    const resolved = await resolveModelPath(SOLO_REPO, { env: env(), ...quiet });
    expect(resolved).toMatchObject({ kind: 'gguf', path: join(home, 'hub', 'models--Quant--Solo-GGUF', 'snapshots', SOLO_SHA, 'qwen3-tiny.gguf') });
    expect(await resolveModelPath(SOLO_REPO, { env: env(), ...quiet })).toEqual(resolved);
  });

  it("names the repo's .gguf files when none or several could be meant", async () => {
    await expect(resolveModelPath(GGUF_REPO, { env: env(), ...quiet })).rejects.toThrow(
      new InvalidArgument(
        `model '${GGUF_REPO}' (revision 'main') on ${hub.url} has no config.json: for a repo of GGUF files, pick one of llama-tiny.gguf, qwen3-tiny.gguf (the ggufFile option; dynamo-llama-cpp --gguf-file)`,
      ),
    );
    await expect(resolveModelPath(GGUF_REPO, { env: env(), ggufFile: 'q8.gguf', ...quiet })).rejects.toThrow(
      `has no q8.gguf (its .gguf files: llama-tiny.gguf, qwen3-tiny.gguf)`,
    );
    await expect(resolveModelPath(GGUF_REPO, { env: env(), ggufFile: '../x.gguf', ...quiet })).rejects.toThrow(
      `ggufFile '../x.gguf' is not the name of a .gguf file at the top of the repo`,
    );
  });
});

describe('Hub errors', () => {
  it('reports an unknown repo as not found on the endpoint', async () => {
    const err = await resolveModelPath('Nobody/Nothing', { env: env(), ...quiet }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toBe(`model 'Nobody/Nothing' not found on ${hub.url} (404)`);
    expect(existsSync(join(home, 'hub', 'models--Nobody--Nothing', 'refs'))).toBe(false);
  });

  it('reports an unknown revision by name', async () => {
    await expect(resolveModelPath(REPO, { env: env(), revision: 'v9', ...quiet })).rejects.toThrow(
      `revision 'v9' of model '${REPO}' not found on ${hub.url} (404)`,
    );
  });

  it('throws CannotConnect naming the endpoint when nothing listens there', async () => {
    const closed = await startHubServer({ repos: {} });
    await closed.close();
    const err = await resolveModelPath(REPO, { env: env({ HF_ENDPOINT: closed.url }), ...quiet }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).toContain(`cannot reach the Hugging Face Hub at ${closed.url}`);
    expect((err as Error).message).toContain('ECONNREFUSED');
  });
});

describe('private repos', () => {
  let gated: HubServer;
  beforeAll(async () => {
    gated = await startHubServer({ repos: { [PRIVATE]: { main: { sha: PRIVATE_SHA, dir: join(fixtures, 'secret') } } }, token: 'hf_test_token' });
  });
  afterAll(() => gated.close());

  it('sends HF_TOKEN as a bearer token to the Hub and not to the blob store', async () => {
    const resolved = await resolveModelPath(PRIVATE, { env: env({ HF_ENDPOINT: gated.url, HF_TOKEN: 'hf_test_token' }), ...quiet });
    expect(resolved.revision).toBe(PRIVATE_SHA);
    const hubCalls = gated.requests.filter((r) => !r.path.startsWith('/cdn/'));
    expect(hubCalls.length).toBeGreaterThan(0);
    expect(hubCalls.every((r) => r.authorization === 'Bearer hf_test_token')).toBe(true);
    // The blob store is another origin: the token never leaves the Hub.
    const cdnCalls = gated.requests.filter((r) => r.path.startsWith('/cdn/'));
    expect(cdnCalls.length).toBeGreaterThan(0);
    expect(cdnCalls.every((r) => r.authorization === undefined)).toBe(true);
  });

  it('reads the token from $HF_HOME/token when HF_TOKEN is unset', async () => {
    writeFileSync(join(home, 'token'), 'hf_test_token\n');
    await expect(resolveModelPath(PRIVATE, { env: env({ HF_ENDPOINT: gated.url }), ...quiet })).resolves.toMatchObject({ repoId: PRIVATE });
  });

  it('without a token fails with 401 and points at HF_TOKEN', async () => {
    const err = await resolveModelPath(PRIVATE, { env: env({ HF_ENDPOINT: gated.url }), ...quiet }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(new RegExp(`model '${PRIVATE}' on .* needs authentication \\(401\\): set HF_TOKEN`));
  });

  it('with a wrong token says the token was refused, without printing it', async () => {
    const err = await resolveModelPath(PRIVATE, { env: env({ HF_ENDPOINT: gated.url, HF_TOKEN: 'hf_wrong' }), ...quiet }).catch((e: unknown) => e);
    expect((err as Error).message).toContain('refused the HF_TOKEN given (401)');
    expect((err as Error).message).not.toContain('hf_wrong');
  });
});

describe('progress', () => {
  it("progress 'log' writes one line when each file starts and ends, through the logger", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    const log: Log = createLogging({ destination: sink, jsonl: true }).child('llm.model-path');
    await resolveModelPath(REPO, { env: env(), progress: 'log', log });
    const done = lines.filter((l) => String(l.msg).startsWith('downloaded '));
    expect(done.map((l) => l.file).sort()).toEqual(CARD_FILES);
    const tokenizer = lines.find((l) => l.msg === `downloading ${REPO}/tokenizer.json (11.4MB)`);
    expect(tokenizer).toMatchObject({ level: 30, repo: REPO, file: 'tokenizer.json', size: readFileSync(QWEN_TOKENIZER_JSON).length });
    expect(lines.at(-1)).toMatchObject({ msg: `model ${REPO} ready at ${join(home, 'hub', 'models--Qwen--Qwen3-Tiny', 'snapshots', MAIN)}` });
  });

  it("progress 'none' writes nothing, not even through a given logger", async () => {
    const calls: unknown[] = [];
    const log: Log = {
      debug: (...a: unknown[]) => calls.push(a),
      info: (...a: unknown[]) => calls.push(a),
      warn: (...a: unknown[]) => calls.push(a),
      error: (...a: unknown[]) => calls.push(a),
    };
    await resolveModelPath(REPO, { env: env(), progress: 'none', log });
    expect(calls).toEqual([]);
  });
});

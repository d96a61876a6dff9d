import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Log } from '@dynamo/runtime';
import { resolveModelPath } from '../src/model-path/index.js';
import { startHubServer, writeModelRepo, type HubServer } from '@dynamo/testing/hub-server';
import { QWEN3_TOKENIZER_JSON as QWEN_TOKENIZER_JSON } from '@dynamo/testing/qwen3-model';

const REPO = 'Qwen/Qwen3-Tiny';
const MAIN = '1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c';

let fixtures: string;
let hub: HubServer;
let home: string;
const tokenizer = readFileSync(QWEN_TOKENIZER_JSON);
const etag = createHash('sha256').update(tokenizer).digest('hex');

const env = () => ({ HF_HOME: home, HF_ENDPOINT: hub.url });
const blobs = () => join(home, 'hub', 'models--Qwen--Qwen3-Tiny', 'blobs');
const tokenizerGets = () => hub.requests.filter((r) => r.method === 'GET' && r.path === `/cdn/${etag}`);

function recordingLog() {
  const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
  const log: Log = {
    debug() {},
    info() {},
    error() {},
    warn: (fields: unknown, message?: string) => void warnings.push({ fields: fields as Record<string, unknown>, message: message ?? '' }),
  };
  return { log, warnings };
}

beforeAll(async () => {
  fixtures = mkdtempSync(join(tmpdir(), 'hub-fixtures-'));
  const main = writeModelRepo(join(fixtures, 'main'));
  hub = await startHubServer({ repos: { [REPO]: { main: { sha: MAIN, dir: main.dir } } } });
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

describe('interrupted downloads', () => {
  it('resumes tokenizer.json with a Range request after the connection drops mid-file', async () => {
    hub.dropConnection('tokenizer.json', 3_000_000);
    const { log, warnings } = recordingLog();
    const resolved = await resolveModelPath(REPO, { env: env(), progress: 'none', log });
    expect(readFileSync(join(resolved.path, 'tokenizer.json')).equals(tokenizer)).toBe(true);
    const gets = tokenizerGets();
    expect(gets).toHaveLength(2);
    expect(gets[0]?.range).toBeUndefined();
    const resumedAt = Number(/^bytes=(\d+)-$/.exec(gets[1]?.range ?? '')?.[1]);
    expect(resumedAt).toBeGreaterThan(0);
    expect(resumedAt).toBeLessThanOrEqual(3_000_000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.message).toMatch(/download of Qwen\/Qwen3-Tiny\/tokenizer.json interrupted .* resuming in \d+ ms/);
    expect(readdirSync(blobs()).some((f) => f.endsWith('.incomplete'))).toBe(false);
  });

  it('a later call resumes the .incomplete blob an earlier process left', async () => {
    mkdirSync(blobs(), { recursive: true });
    writeFileSync(join(blobs(), `${etag}.incomplete`), tokenizer.subarray(0, 5_000_000));
    const resolved = await resolveModelPath(REPO, { env: env(), progress: 'none' });
    expect(tokenizerGets().map((r) => r.range)).toEqual(['bytes=5000000-']);
    expect(readFileSync(join(resolved.path, 'tokenizer.json')).equals(tokenizer)).toBe(true);
  });

  it('starts over when the resumed file does not match its sha256', async () => {
    mkdirSync(blobs(), { recursive: true });
    writeFileSync(join(blobs(), `${etag}.incomplete`), Buffer.alloc(1000, 0x41));
    const { log, warnings } = recordingLog();
    const resolved = await resolveModelPath(REPO, { env: env(), progress: 'none', log });
    expect(tokenizerGets().map((r) => r.range)).toEqual(['bytes=1000-', undefined]);
    expect(warnings[0]?.message).toMatch(/sha256 of the download is [0-9a-f]{64}, expected/);
    expect(readFileSync(join(resolved.path, 'tokenizer.json')).equals(tokenizer)).toBe(true);
  });

  it('finishes a complete .incomplete file without downloading it again', async () => {
    mkdirSync(blobs(), { recursive: true });
    writeFileSync(join(blobs(), `${etag}.incomplete`), tokenizer);
    await resolveModelPath(REPO, { env: env(), progress: 'none' });
    expect(tokenizerGets()).toEqual([]);
  });

  it('aborting leaves the partial blob for the next call', async () => {
    hub.dropConnection('tokenizer.json', 2_000_000);
    const controller = new AbortController();
    const { log } = recordingLog();
    // Abort as soon as the drop is noticed (during the backoff before resuming).
    const warn = log.warn.bind(log);
    log.warn = (f: unknown, m?: string) => {
      warn(f, m);
      controller.abort();
    };
    await expect(resolveModelPath(REPO, { env: env(), progress: 'none', log, signal: controller.signal })).rejects.toMatchObject({ kind: 'Cancelled' });
    expect(existsSync(join(blobs(), `${etag}.incomplete`))).toBe(true);
    hub.requests.length = 0;
    const resolved = await resolveModelPath(REPO, { env: env(), progress: 'none' });
    expect(tokenizerGets()[0]?.range).toMatch(/^bytes=[1-9]\d*-$/);
    expect(readFileSync(join(resolved.path, 'tokenizer.json')).equals(tokenizer)).toBe(true);
  });
});

describe('download locks', () => {
  it('takes over a lock file left by a process that died', async () => {
    const dead = spawnSync(process.execPath, ['-e', '0']).pid;
    const locks = join(home, 'hub', '.locks', 'models--Qwen--Qwen3-Tiny');
    mkdirSync(locks, { recursive: true });
    writeFileSync(join(locks, `${etag}.dynamo-lock`), `${hostname()}\n${dead}\n`);
    const resolved = await resolveModelPath(REPO, { env: env(), progress: 'none' });
    expect(readFileSync(join(resolved.path, 'tokenizer.json')).equals(tokenizer)).toBe(true);
    expect(readdirSync(locks)).toEqual([]);
  });
});

// Card files a worker serves over HTTP (a stock worker with DYN_SYSTEM_PORT self-hosts them at
// /v1/metadata/...): the frontend downloads them into its content-addressed cache, checks each
// checksum, and loads the model from there; bad downloads fail naming the file.
import { createReadStream, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { buildCard, LocalModel, type ModelDeploymentCard, ModelInput, ModelType } from '@dynamo/llm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { CardFiles } from '../src/models/card-files.js';
import { modelDir } from '@dynamo/testing/frontend-stack';

let server: Server;
let base = '';
const served: string[] = [];
/** File name → replacement bytes, to serve a file that is not what the card says. */
const tampered = new Map<string, string>();
const caches: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const name = basename(req.url ?? '');
    served.push(name);
    if (tampered.has(name)) return res.end(tampered.get(name));
    const path = join(modelDir, name);
    if (!existsSync(path)) return res.writeHead(404).end('not found');
    createReadStream(path).pipe(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/metadata/dynamo/backend/generate/qwen3/_base`;
});
afterAll(() => {
  server.close();
  for (const dir of caches) rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  served.length = 0;
  tampered.clear();
});

/** A card of the test model whose files are at `base` over HTTP, as a self-hosting worker publishes it. */
async function httpCard(name = 'qwen3'): Promise<ModelDeploymentCard> {
  const card = buildCard(await LocalModel.load(modelDir), { modelName: name, modelInput: ModelInput.Tokens, modelType: ModelType.Chat });
  return JSON.parse(JSON.stringify(card).replaceAll(JSON.stringify(modelDir).slice(1, -1), base)) as ModelDeploymentCard;
}

function cache(): string {
  const dir = mkdtempSync(join(tmpdir(), 'card-cache-'));
  caches.push(dir);
  return dir;
}

describe('card files over HTTP', () => {
  it('are downloaded into the cache, checked, and loaded; a second load reads the cache', async () => {
    const card = await httpCard();
    expect(JSON.stringify(card)).toContain(`${base}/tokenizer.json`);
    const cacheDir = cache();
    const model = await new CardFiles({ cacheDir }).load(card);
    expect(Array.from((await model.tokenizer()).encodeSync('Hello there', false))).toEqual([9707, 1052]);
    expect(served.sort()).toEqual(['config.json', 'tokenizer.json', 'tokenizer_config.json']);
    expect(readdirSync(join(cacheDir, 'blobs'))).toHaveLength(3);

    served.length = 0;
    await new CardFiles({ cacheDir }).load(card);
    expect(served).toEqual([]);
  });

  it('a file whose bytes differ from the card is refused, naming it and both checksums', async () => {
    tampered.set('tokenizer_config.json', '{}');
    await expect(new CardFiles({ cacheDir: cache() }).load(await httpCard())).rejects.toThrow(
      /model qwen3: card file http:\/\/.*\/tokenizer_config\.json: its bytes have checksum blake3:[0-9a-f]{64} but the card says blake3:/,
    );
  });

  it('a file the worker cannot serve fails with its HTTP status; --model-path is used instead when given', async () => {
    const card = await httpCard();
    const broken = JSON.parse(JSON.stringify(card).replace(`${base}/config.json`, `${base}/missing-config.json`)) as ModelDeploymentCard;
    await expect(new CardFiles({ cacheDir: cache() }).load(broken)).rejects.toThrow(/missing-config\.json: HTTP 404.*pass --model-path/);
    const model = await new CardFiles({ cacheDir: cache(), fallbackModelPath: modelDir }).load(card);
    expect((await model.tokenizer()).encodeSync('Hello', false).length).toBe(1);
  });
});

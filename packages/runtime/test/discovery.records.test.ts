// Our discovery records must be what stock Dynamo 1.6 writes and reads (see test/interop/fixtures).
import { readFileSync } from 'node:fs';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Discovery } from '../src/discovery/discovery.js';
import { FileKvStore } from '../src/discovery/file.js';
import { decodeEndpointRecord } from '../src/discovery/records.js';
import { createLogging } from '../src/logger.js';

const fixtures = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'interop', 'fixtures', 'wire-1.6.1');
const log = createLogging({ filter: 'off' }).child('test');

describe('discovery records against stock Dynamo 1.6.1', () => {
  it('reads the Endpoint record a stock worker wrote, u64 id exact', () => {
    const text = readFileSync(join(fixtures, 'endpoint-record-json.json'), 'utf8').trim();
    const record = decodeEndpointRecord(text);
    expect(record.instance_id).toBe(3022580304317045013n);
    expect(record.transport).toEqual({ tcp: '192.0.2.2:39089/29f25cc5bfe8d915/ns/jsonw/generate' });
    expect(record.request_plane_codec).toBe('json');
  });

  it('writes the same bytes as stock: field order, bare u64, path form, codec; file name encoding', async () => {
    const root = mkdtempSync(join(tmpdir(), 'dynamo-records-'));
    const id = 3022580304317045013n;
    const store = new FileKvStore({ root, instanceId: id, log });
    try {
      await new Discovery(store, log).registerEndpoint('ns', 'jsonw', 'generate', { tcp: '192.0.2.2:39089/29f25cc5bfe8d915/ns/jsonw/generate' });
      const dir = join(root, 'v1', 'instances');
      expect(readdirSync(dir)).toEqual(['ns%2Fjsonw%2Fgenerate%2F29f25cc5bfe8d915']);
      const stockText = readFileSync(join(fixtures, 'endpoint-record-json.json'), 'utf8').trim();
      // Stock also writes device_type (which stock readers treat as optional); everything else matches.
      expect(readFileSync(join(dir, 'ns%2Fjsonw%2Fgenerate%2F29f25cc5bfe8d915'), 'utf8')).toBe(stockText.replace('"device_type":"cuda",', ''));
    } finally {
      await store.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

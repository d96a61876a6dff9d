import { createHash, randomBytes } from 'node:crypto';

import { CannotConnect, Context, DistributedRuntime, InvalidArgument, loadRuntimeConfig, MemKvSpace, type ServedEndpoint } from '@dynamo/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import type { ExportedKvState } from '../src/index.js';
import { KV_TRANSFER_ENDPOINT, kvTransferHandler, RuntimeKvTransfer } from '../src/worker/kv-transfer.js';
import { GoodEngine } from './engines.js';

/** A prefill engine whose states are byte arrays handed out in `chunk`-byte pieces, `declared` bytes long unless it lies. */
class StatesEngine extends GoodEngine {
  readonly states = new Map<string, { bytes: Uint8Array; chunk: number; declared?: number; pause?: () => Promise<void> }>();
  readonly done: Array<[string, boolean]> = [];

  override async exportKvState(id: string): Promise<ExportedKvState> {
    const state = this.states.get(id);
    if (!state) throw new InvalidArgument(`no KV state ${id}`);
    const { bytes, chunk, pause } = state;
    async function* chunks(): AsyncGenerator<Uint8Array> {
      for (let at = 0; at < bytes.length; at += chunk) {
        if (at > 0 && pause) await pause();
        yield bytes.subarray(at, at + chunk);
      }
    }
    return { header: { model: 'm', tokens: 7 }, bytes: state.declared ?? bytes.length, chunks: chunks(), done: (sent) => this.done.push([id, sent]) };
  }
}

const space = new MemKvSpace();
const config = loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error' });
const engine = new StatesEngine();
let prefill: DistributedRuntime;
let decode: DistributedRuntime;
let served: ServedEndpoint;
let sender: RuntimeKvTransfer;
let receiver: RuntimeKvTransfer;

beforeAll(async () => {
  prefill = await DistributedRuntime.create({ config, memSpace: space });
  decode = await DistributedRuntime.create({ config, memSpace: space });
  served = await prefill
    .namespace('test')
    .component('prefill')
    .endpoint(KV_TRANSFER_ENDPOINT)
    .serveEndpoint(kvTransferHandler(engine, 64 * 1024 * 1024));
  sender = new RuntimeKvTransfer(prefill, { namespace: 'test', component: 'prefill' }, 64 * 1024 * 1024);
  receiver = new RuntimeKvTransfer(decode, { namespace: 'test', component: 'decode' }, 16 * 1024 * 1024);
});
afterAll(async () => {
  await receiver.close();
  await served.stop();
  await decode.shutdown();
  await prefill.shutdown();
});

async function drain(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('KV transfer between a prefill and a decode worker through the runtime', () => {
  it('pulls a 5 MiB state named by a handle, header first, every byte in order, and counts the transfer', async () => {
    const bytes = randomBytes(5 * 1024 * 1024 + 123);
    engine.states.set('a', { bytes, chunk: 300_000 });
    const handle = sender.handle('a', bytes.length);
    expect(handle).toEqual({ endpoint: 'test.prefill.kv_transfer', instance_id: prefill.instanceId.toString(16), id: 'a', bytes: bytes.length });
    const pulled = await receiver.pull(JSON.parse(JSON.stringify(handle)), new Context());
    expect(pulled.header).toEqual({ model: 'm', tokens: 7 });
    expect(pulled.bytes).toBe(bytes.length);
    expect(sha(await drain(pulled.chunks))).toBe(sha(bytes));
    expect(engine.done).toContainEqual(['a', true]);
    const metrics = await decode.metrics.registry.getSingleMetricAsString('dynamo_component_kv_transfer_bytes');
    expect(metrics).toMatch(/dynamo_component_kv_transfer_bytes_count(\{[^}]*\})? 1\b/);
  });

  it('refuses a malformed handle and a state over the limit before any connection, naming what is wrong', async () => {
    await expect(receiver.pull({ endpoint: 'test.prefill.kv_transfer', instance_id: 'not-hex', id: 'a', bytes: 1 }, new Context())).rejects.toThrow(
      /prefill_result\.disaggregated_params\.kv_transfer.*instance_id/s,
    );
    await expect(receiver.pull(undefined, new Context())).rejects.toBeInstanceOf(InvalidArgument);
    const over = receiver.pull(sender.handle('a', 17 * 1024 * 1024), new Context());
    await expect(over).rejects.toBeInstanceOf(InvalidArgument);
    await expect(over).rejects.toThrow(
      `the prefilled KV state is ${17 * 1024 * 1024} bytes, over the ${16 * 1024 * 1024}-byte transfer limit (DYN_KV_TRANSFER_MAX_BYTES)`,
    );
  });

  it('fails with CannotConnect when the prefill worker does not have the state or is not there', async () => {
    const unknown = receiver.pull(sender.handle('nope', 10), new Context());
    await expect(unknown).rejects.toBeInstanceOf(CannotConnect);
    await expect(unknown).rejects.toThrow('no KV state nope');
    const gone = receiver.pull({ ...sender.handle('a', 10), instance_id: 'abcdef' }, new Context());
    await expect(gone).rejects.toBeInstanceOf(CannotConnect);
  });

  it('fails the pull when the engine sends more bytes than it declared', async () => {
    engine.states.set('liar', { bytes: randomBytes(2000), chunk: 500, declared: 1000 });
    const pulled = await receiver.pull(sender.handle('liar', 1000), new Context());
    await expect(drain(pulled.chunks)).rejects.toThrow(/exported more than the 1000 bytes it declared/);
    expect(engine.done).toContainEqual(['liar', false]);
  });

  it('fails the pull with CannotConnect, naming how far it got, when the prefill side breaks off mid-transfer', async () => {
    const bytes = randomBytes(3 * 1024 * 1024);
    engine.states.set('broken', { bytes, chunk: 1024 * 1024, pause: () => Promise.reject(new Error('state file vanished')) });
    const pulled = await receiver.pull(sender.handle('broken', bytes.length), new Context());
    const reading = drain(pulled.chunks);
    await expect(reading).rejects.toBeInstanceOf(CannotConnect);
    await expect(reading).rejects.toThrow(/KV state broken from prefill worker [0-9a-f]+ broke off after 1048576 of 3145728 bytes: .*state file vanished/);
    expect(engine.done).toContainEqual(['broken', false]);
  });
});

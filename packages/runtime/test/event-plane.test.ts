import { connect } from '@nats-io/transport-node';
import { Publisher as ZmqPublisher } from 'zeromq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DistributedRuntime, loadRuntimeConfig, MemKvSpace } from '../src/index.js';
import { decodeEventChannelRecord, EVENT_CHANNELS_BUCKET, eventRecordKey, eventSubject, parseJson, parseZmqFrames, zmqFrames } from '../src/internal.js';
import { waitFor } from '@dynamo/testing/free-port';
import { type NatsTestServer, startNatsServer } from '@dynamo/testing/nats';

const scope = { namespace: 'dyn', component: 'backend', endpoint: 'generate' };

async function runtime(env: Record<string, string>, space?: MemKvSpace): Promise<DistributedRuntime> {
  return DistributedRuntime.create({
    config: loadRuntimeConfig({ DYN_DISCOVERY_BACKEND: 'mem', DYN_LOG: 'error', ...env }),
    ...(space ? { memSpace: space } : {}),
  });
}

describe('event plane names', () => {
  it('builds stock subjects, escaping every byte but letters, digits, - and _', () => {
    expect(eventSubject(scope, 'kv-events')).toBe('namespace.dyn.component.backend.endpoint.generate.kv-events');
    expect(eventSubject({ namespace: 'a.b', component: 'c d', endpoint: 'é' }, 'kv_metrics')).toBe(
      'namespace.a%2Eb.component.c%20d.endpoint.%C3%A9.kv_metrics',
    );
    expect(eventRecordKey(scope, 'kv-events', 0xabcn)).toBe('namespace/dyn/component/backend/endpoint/generate/topic/kv-events/abc');
  });

  it('frames and parses stock ZMQ messages, naming what is wrong with a bad one', () => {
    const frames = zmqFrames('kv-events', 5249398591840922n, 7n, Uint8Array.of(0x90));
    expect(frames[3]).toEqual(Buffer.from([1, 0, 0, 0, 1, 0x90]));
    expect(parseZmqFrames(frames, 'kv-events')).toEqual({ ok: true, publisherId: 5249398591840922n, sequence: 7n, envelope: Buffer.from([0x90]) });
    expect(parseZmqFrames(frames.slice(0, 3), 'kv-events')).toEqual({ ok: false, reason: 'expected 4 frames, got 3' });
    expect(parseZmqFrames(frames, 'kv_metrics')).toMatchObject({ ok: false, reason: expect.stringContaining('is not "kv_metrics"') });
    expect(parseZmqFrames([...frames.slice(0, 3), Buffer.from([1, 0, 0, 0, 9, 0x90])], 'kv-events')).toMatchObject({
      ok: false,
      reason: 'frame says 9 bytes, carries 1',
    });
  });

  it('rejects an unknown event plane and an unspecified advertise host', () => {
    expect(() => loadRuntimeConfig({ DYN_EVENT_PLANE: 'kafka' })).toThrow(/Invalid DYN_EVENT_PLANE value 'kafka'. Valid values: 'nats', 'zmq'/);
    expect(() => loadRuntimeConfig({ DYN_EVENT_PLANE_HOST: '0.0.0.0' })).toThrow(/DYN_EVENT_PLANE_HOST/);
    expect(loadRuntimeConfig({}).eventPlane.plane).toBe('zmq');
  });
});

describe('ZMQ event plane (the default)', () => {
  it('advertises a PUB socket in v1/event_channels and delivers envelopes in order to a subscriber', async () => {
    const space = new MemKvSpace();
    const worker = await runtime({ DYN_EVENT_PLANE_HOST: '127.0.0.1' }, space);
    const router = await runtime({}, space);
    try {
      const publisher = await worker.eventPublisher(scope, 'kv-events');
      const entries = await worker.discovery.store.list(EVENT_CHANNELS_BUCKET);
      expect(entries.map((e) => e.key)).toEqual([eventRecordKey(scope, 'kv-events', publisher.publisherId)]);
      const record = decodeEventChannelRecord(entries[0]!.value);
      expect(parseJson(entries[0]!.value)).toEqual({
        type: 'EventChannel',
        scope: { kind: 'endpoint', endpoint: { namespace: 'dyn', component: 'backend', name: 'generate' } },
        topic: 'kv-events',
        instance_id: Number(publisher.publisherId),
        transport: { kind: 'Zmq', config: { endpoint: expect.stringMatching(/^tcp:\/\/127\.0\.0\.1:\d+$/) } },
      });
      expect(record.instance_id < 1n << 53n).toBe(true);

      const got: string[] = [];
      const subscriber = await router.eventSubscriber(scope, 'kv-events', (envelope) => got.push(Buffer.from(envelope).toString()));
      expect(subscriber.connections).toBe(1);
      // A PUB socket drops what it sends before the subscription reaches it: publish until one lands.
      await waitFor('first envelope', () => {
        publisher.publish(() => Buffer.from('warmup'));
        return got.length > 0;
      });
      const sequences: bigint[] = [];
      for (let i = 0; i < 50; i++) {
        publisher.publish((_id, seq) => {
          sequences.push(seq);
          return Buffer.from(`m${i}`);
        });
      }
      await waitFor('50 envelopes', () => got.filter((m) => m !== 'warmup').length >= 50);
      expect(got.filter((m) => m !== 'warmup')).toEqual(Array.from({ length: 50 }, (_, i) => `m${i}`));
      expect(sequences[1]! - sequences[0]!).toBe(1n);

      await publisher.close();
      expect(await worker.discovery.store.list(EVENT_CHANNELS_BUCKET)).toEqual([]);
      await waitFor('subscriber to drop the gone publisher', () => subscriber.connections === 0);
    } finally {
      await router.shutdown();
      await worker.shutdown();
    }
  });

  it('drops malformed messages and keeps receiving', async () => {
    const space = new MemKvSpace();
    const router = await runtime({}, space);
    const rogue = new ZmqPublisher({ linger: 0 });
    try {
      await rogue.bind('tcp://127.0.0.1:0');
      await router.discovery.store.put(
        EVENT_CHANNELS_BUCKET,
        eventRecordKey(scope, 'kv-events', 1n),
        JSON.stringify({
          type: 'EventChannel',
          scope: { kind: 'endpoint', endpoint: { namespace: 'dyn', component: 'backend', name: 'generate' } },
          topic: 'kv-events',
          instance_id: 1,
          transport: { kind: 'Zmq', config: { endpoint: rogue.lastEndpoint } },
        }),
      );
      const got: Buffer[] = [];
      await router.eventSubscriber(scope, 'kv-events', (e) => got.push(Buffer.from(e)));
      await waitFor('a good message after bad ones', async () => {
        await rogue.send(['kv-events', 'too few frames']);
        await rogue.send(zmqFrames('kv-events', 1n, 0n, Buffer.from('ok')));
        return got.length > 0;
      });
      expect(got.every((b) => b.toString() === 'ok')).toBe(true);
    } finally {
      rogue.close();
      await router.shutdown();
    }
  });
});

describe('NATS event plane', () => {
  let nats: NatsTestServer;
  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });

  it('publishes the bare envelope on the endpoint-scoped subject', async () => {
    const space = new MemKvSpace();
    const env = { DYN_EVENT_PLANE: 'nats', NATS_SERVER: nats.url };
    const worker = await runtime(env, space);
    const router = await runtime(env, space);
    const raw = await connect({ servers: nats.url });
    try {
      const seen: Uint8Array[] = [];
      const sub = raw.subscribe('namespace.dyn.component.backend.endpoint.generate.kv_metrics', { callback: (_e, m) => void seen.push(m.data) });
      const got: string[] = [];
      await router.eventSubscriber(scope, 'kv_metrics', (e) => got.push(Buffer.from(e).toString()));
      const publisher = await worker.eventPublisher(scope, 'kv_metrics');
      const record = parseJson((await worker.discovery.store.list(EVENT_CHANNELS_BUCKET))[0]!.value) as { transport: unknown };
      expect(record.transport).toEqual({ kind: 'Nats', config: { subject_prefix: 'namespace.dyn.component.backend.endpoint.generate' } });
      await raw.flush();
      publisher.publish(() => Buffer.from('load'));
      await waitFor('NATS delivery', () => got.length === 1 && seen.length === 1);
      expect(Buffer.from(seen[0]!).toString()).toBe('load');
      sub.unsubscribe();
    } finally {
      await raw.close();
      await router.shutdown();
      await worker.shutdown();
    }
  });
});

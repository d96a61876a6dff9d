import { randomBytes } from 'node:crypto';
import { nkeys } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CannotConnect, InvalidArgument } from '../src/errors.js';
import { loadRuntimeConfig } from '../src/config.js';
import { MemKvSpace } from '../src/discovery/mem.js';
import { DistributedRuntime } from '../src/runtime.js';
import type { Log } from '../src/logger.js';
import { type NatsConnection, type NatsConnectionOptionsInput, connectNats, parseNatsConnectionOptions } from '../src/wire/nats-connection.js';
import { NatsRequestPlaneClient, NatsRequestPlaneServer, natsEndpointSubject } from '../src/request-plane/nats.js';
import type { RequestAcceptor } from '../src/request-plane/request-plane.js';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { type NatsTestServer, startNatsServer } from '@dynamo/testing/nats';
import { makeTestTlsFiles } from '@dynamo/testing/tls';

/** A logger that keeps every line as text, so tests can read what was (and was not) logged. */
function captureLog() {
  const lines: string[] = [];
  const at = (level: string) => (obj: object, msg?: string) => lines.push(`${level} ${msg} ${JSON.stringify(obj)}`);
  const log: Log = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { log, lines, text: () => lines.join('\n') };
}

/** Stands in for the envelope decoder: a two-part message is 24 header bytes plus the lengths they state. */
function checkTwoPart(envelope: Uint8Array): void {
  if (envelope.length < 24) throw new RangeError(`two-part message needs 24 header bytes, got ${envelope.length}`);
  const view = new DataView(envelope.buffer, envelope.byteOffset, envelope.byteLength);
  const total = 24n + view.getBigUint64(0) + view.getBigUint64(8);
  if (total !== BigInt(envelope.length)) throw new RangeError(`two-part message states ${total} bytes, got ${envelope.length}`);
}

function twoPart(header: Uint8Array, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(24 + header.length + body.length);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(header.length));
  view.setBigUint64(8, BigInt(body.length));
  out.set(header, 24);
  out.set(body, 24 + header.length);
  return out;
}

const fastReconnect = { reconnectMinDelayMs: 50, reconnectMaxDelayMs: 400 } satisfies NatsConnectionOptionsInput;
const connections: NatsConnection[] = [];
const servers: NatsTestServer[] = [];

async function open(options: NatsConnectionOptionsInput, log: Log = captureLog().log): Promise<NatsConnection> {
  const nc = await connectNats({ ...fastReconnect, ...options }, log);
  connections.push(nc);
  return nc;
}

async function nats(options: Parameters<typeof startNatsServer>[0] = {}): Promise<NatsTestServer> {
  const server = await startNatsServer(options);
  servers.push(server);
  return server;
}

afterAll(async () => {
  await Promise.all(connections.map((nc) => nc.close().catch(() => undefined)));
  await Promise.all(servers.map((s) => s.stop()));
});

describe('NATS request plane', () => {
  let server: NatsTestServer;
  let workerNc: NatsConnection;
  let callerNc: NatsConnection;
  const planes: NatsRequestPlaneServer[] = [];
  const workerLog = captureLog();

  beforeAll(async () => {
    server = await nats();
    workerNc = await open({ server: server.url }, workerLog.log);
    callerNc = await open({ server: server.url });
  });

  afterEach(async () => {
    await Promise.all(planes.splice(0).map((p) => p.close()));
  });

  function worker(nc = workerNc): NatsRequestPlaneServer {
    const plane = new NatsRequestPlaneServer(nc, { log: workerLog.log });
    planes.push(plane);
    return plane;
  }

  it('acknowledges a request and hands the acceptor its headers and binary payload intact', async () => {
    const seen: { envelope: Uint8Array; headers: Record<string, string> }[] = [];
    const accept: RequestAcceptor = (envelope, headers) => {
      seen.push({ envelope: envelope.slice(), headers });
      return '';
    };
    const transport = await worker().serve('dynamo', 'backend', 'generate', 0x694d9a3c5e1f2a07n, accept);
    expect(transport).toEqual({ nats_tcp: 'dynamo_backend.generate-694d9a3c5e1f2a07' });

    const every = Uint8Array.from({ length: 256 }, (_, i) => i);
    const envelope = twoPart(new TextEncoder().encode('{"id":"r1"}'), Buffer.concat([every, randomBytes(64 * 1024)]));
    const headers = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'x-request-id': 'r1' };
    await new NatsRequestPlaneClient(callerNc).send(transport, envelope, headers);

    expect(seen).toHaveLength(1);
    expect(Buffer.compare(Buffer.from(seen[0]!.envelope), Buffer.from(envelope))).toBe(0);
    expect(seen[0]!.headers).toEqual(headers);
  });

  it('gives two instances of one endpoint distinct subjects, and a caller can target each', async () => {
    const secondNc = await open({ server: server.url });
    const got = { a: 0, b: 0 };
    const a = await worker().serve('ns', 'comp', 'generate', 0xan, () => {
      got.a += 1;
      return '';
    });
    const b = await worker(secondNc).serve('ns', 'comp', 'generate', 0xbn, () => {
      got.b += 1;
      return '';
    });
    expect(a).toEqual({ nats_tcp: 'ns_comp.generate-a' });
    expect(b).toEqual({ nats_tcp: natsEndpointSubject('ns', 'comp', 'generate', 0xbn) });
    expect(a).not.toEqual(b);

    const client = new NatsRequestPlaneClient(callerNc);
    for (let i = 0; i < 3; i++) await client.send(a, twoPart(new Uint8Array(1), new Uint8Array(1)), {});
    for (let i = 0; i < 5; i++) await client.send(b, twoPart(new Uint8Array(1), new Uint8Array(1)), {});
    expect(got).toEqual({ a: 3, b: 5 });
  });

  it('refuses a subject nobody serves at once with CannotConnect (no responders)', async () => {
    const client = new NatsRequestPlaneClient(callerNc, { requestTimeoutMs: 10_000 });
    const started = Date.now();
    const err = await client.send({ nats_tcp: 'ns_comp.generate-dead' }, new Uint8Array(24), {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).toMatch(/no responders.*ns_comp\.generate-dead/);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('stops answering an endpoint after unserve', async () => {
    const plane = worker();
    const transport = await plane.serve('ns', 'comp', 'gone', 7n, () => '');
    const client = new NatsRequestPlaneClient(callerNc);
    await client.send(transport, new Uint8Array(24), {});
    await plane.unserve('ns', 'comp', 'gone');
    await expect(client.send(transport, new Uint8Array(24), {})).rejects.toThrow(/no responders/);
  });

  it("returns the acceptor's error text as CannotConnect with that text", async () => {
    const transport = await worker().serve('ns', 'comp', 'busy', 1n, () => 'Server unavailable: worker is shutting down');
    const err = await new NatsRequestPlaneClient(callerNc).send(transport, new Uint8Array(24), {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).toBe('Server unavailable: worker is shutting down');
  });

  it('gives up with CannotConnect when no acknowledgement arrives in time', async () => {
    const silent = workerNc.subscribe('ns_comp.silent-1', { callback: () => undefined });
    await workerNc.flush();
    try {
      const client = new NatsRequestPlaneClient(callerNc, { requestTimeoutMs: 300 });
      const err = await client.send({ nats_tcp: 'ns_comp.silent-1' }, new Uint8Array(24), {}).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CannotConnect);
      expect((err as Error).message).toMatch(/no acknowledgement.*300 ms/);
    } finally {
      silent.unsubscribe();
    }
  });

  it('survives empty and garbage payloads while concurrent good requests still succeed', async () => {
    let accepted = 0;
    const transport = await worker().serve('ns', 'comp', 'robust', 0xfeedn, (envelope) => {
      checkTwoPart(envelope);
      accepted += 1;
      return '';
    });
    const client = new NatsRequestPlaneClient(callerNc);
    const good = Array.from({ length: 40 }, (_, i) => client.send(transport, twoPart(new Uint8Array([i]), randomBytes(100)), { i: String(i) }));
    const bad = [new Uint8Array(0), randomBytes(7), randomBytes(5000), new Uint8Array(24).fill(0xff)].map((payload) =>
      client.send(transport, payload, {}).then(
        () => 'acked',
        (e: unknown) => e,
      ),
    );
    // Fire-and-forget garbage without a reply subject must not hurt either.
    callerNc.publish((transport as { nats_tcp: string }).nats_tcp, randomBytes(33));

    await Promise.all(good);
    for (const outcome of await Promise.all(bad)) {
      expect(outcome).toBeInstanceOf(CannotConnect);
      expect((outcome as Error).message).toMatch(/^invalid request: two-part message/);
    }
    await client.send(transport, twoPart(new Uint8Array(2), new Uint8Array(3)), {});
    expect(accepted).toBe(41);
    expect(workerLog.text()).toMatch(/rejected a malformed NATS request/);
  });

  it('fails the requests still waiting for an ack when the client is closed, and refuses new ones', async () => {
    const silent = workerNc.subscribe('ns_comp.slow-1', { callback: () => undefined });
    await workerNc.flush();
    try {
      const client = new NatsRequestPlaneClient(callerNc, { requestTimeoutMs: 10_000 });
      const waiting = client.send({ nats_tcp: 'ns_comp.slow-1' }, new Uint8Array(24), {}).catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 50));
      await client.close();
      const err = await waiting;
      expect(err).toBeInstanceOf(CannotConnect);
      expect((err as Error).message).toMatch(/client was closed.*ns_comp\.slow-1/);
      await expect(client.send({ nats_tcp: 'ns_comp.slow-1' }, new Uint8Array(24), {})).rejects.toThrow(/request-plane client is closed/);
    } finally {
      silent.unsubscribe();
    }
  });

  it('publishes per event-loop turn with batchWindowMs 0, and refuses a window out of range', async () => {
    const transport = await worker().serve('ns', 'comp', 'unbatched', 4n, () => '');
    const client = new NatsRequestPlaneClient(callerNc, { batchWindowMs: 0 });
    await Promise.all(Array.from({ length: 20 }, () => client.send(transport, twoPart(new Uint8Array(1), new Uint8Array(1)), {})));
    expect(() => new NatsRequestPlaneClient(callerNc, { batchWindowMs: -1 })).toThrow(/batchWindowMs/);
  });

  it('matches acks to their requests when many are in flight at once', async () => {
    const transport = await worker().serve('ns', 'comp', 'mixed', 3n, (envelope) =>
      envelope[envelope.length - 1]! % 2 === 0 ? '' : `odd ${envelope[envelope.length - 1]}`,
    );
    const client = new NatsRequestPlaneClient(callerNc);
    const outcomes = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        client.send(transport, twoPart(new Uint8Array(1), new Uint8Array([i % 256])), {}).then(
          () => 'ok',
          (e: unknown) => (e as Error).message,
        ),
      ),
    );
    for (const [i, outcome] of outcomes.entries()) expect(outcome).toBe(i % 2 === 0 ? 'ok' : `odd ${i % 256}`);
  });

  it("rejects an envelope over the server's max_payload with a clear error", async () => {
    const transport = await worker().serve('ns', 'comp', 'big', 2n, () => '');
    const maxPayload = callerNc.info!.max_payload;
    const err = await new NatsRequestPlaneClient(callerNc).send(transport, new Uint8Array(maxPayload + 1), {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(new RegExp(`exceeds the NATS server's max_payload of ${maxPayload} bytes`));
  });

  it('rejects a transport that is not a NATS subject', async () => {
    await expect(new NatsRequestPlaneClient(callerNc).send({ tcp: '127.0.0.1:1/x' }, new Uint8Array(24), {})).rejects.toThrow(/DYN_REQUEST_PLANE/);
  });

  it('answers the NATS service-discovery subjects ($SRV.PING, INFO, STATS)', async () => {
    const transport = await worker().serve('dyn', 'backend', 'generate', 0xabcn, () => 'nope');
    await new NatsRequestPlaneClient(callerNc).send(transport, new Uint8Array(24), {}).catch(() => undefined);

    const ping = (await callerNc.request('$SRV.PING.dyn_backend', undefined, { timeout: 2_000 })).json<Record<string, unknown>>();
    expect(ping).toMatchObject({ type: 'io.nats.micro.v1.ping_response', name: 'dyn_backend' });
    const info = (await callerNc.request(`$SRV.INFO.dyn_backend.${String(ping.id)}`, undefined, { timeout: 2_000 })).json<{
      endpoints: unknown[];
    }>();
    expect(info.endpoints).toEqual([{ name: 'generate-abc', subject: 'dyn_backend.generate-abc', queue_group: 'dyn_backend', metadata: {} }]);
    const stats = (await callerNc.request('$SRV.STATS.dyn_backend', undefined, { timeout: 2_000 })).json<{
      endpoints: Record<string, unknown>[];
    }>();
    expect(stats.endpoints[0]).toMatchObject({ subject: 'dyn_backend.generate-abc', num_requests: 1, num_errors: 1, last_error: 'nope' });
  });

  it('refuses names that cannot form a NATS subject, and serving one endpoint twice', async () => {
    const plane = worker();
    await expect(plane.serve('a.b', 'comp', 'ep', 1n, () => '')).rejects.toBeInstanceOf(InvalidArgument);
    await expect(plane.serve('ns', 'co mp', 'ep', 1n, () => '')).rejects.toBeInstanceOf(InvalidArgument);
    await plane.serve('ns', 'comp', 'twice', 1n, () => '');
    await expect(plane.serve('ns', 'comp', 'twice', 2n, () => '')).rejects.toThrow(/already served/);
  });
});

describe('NATS connection', () => {
  async function roundTrip(nc: NatsConnection): Promise<void> {
    const plane = new NatsRequestPlaneServer(nc, { log: captureLog().log });
    try {
      const transport = await plane.serve('auth', 'check', 'ep', BigInt(Math.floor(Math.random() * 1e9)), () => '');
      await new NatsRequestPlaneClient(nc).send(transport, new Uint8Array(24), {});
    } finally {
      await plane.close();
    }
  }

  it('authenticates with user/password; a wrong password is CannotConnect naming the server, never the password', async () => {
    const server = await nats({ user: 'dynamo', pass: 'pw-correct-7f3a' });
    const capture = captureLog();
    await roundTrip(await open({ server: server.url, username: 'dynamo', password: 'pw-correct-7f3a' }, capture.log));

    const err = await connectNats({ server: server.url, username: 'dynamo', password: 'pw-wrong-91c2' }, capture.log).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).toContain(server.url);
    expect((err as Error).message).toMatch(/authorization/i);
    expect((err as Error).message).not.toContain('pw-wrong-91c2');
    expect(capture.lines.length).toBeGreaterThan(0);
    expect(capture.text()).not.toMatch(/pw-correct-7f3a|pw-wrong-91c2/);
  });

  it('authenticates with a token, and with credentials embedded in the URL without logging them', async () => {
    const server = await nats({ token: 'tok-5d1e-secret' });
    const capture = captureLog();
    await roundTrip(await open({ server: server.url, token: 'tok-5d1e-secret' }, capture.log));
    await roundTrip(await open({ server: `nats://tok-5d1e-secret@127.0.0.1:${server.port}` }, capture.log));
    const err = await connectNats({ server: server.url, token: 'tok-wrong-secret' }, capture.log).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).not.toContain('tok-wrong-secret');
    expect(capture.text()).toContain(`127.0.0.1:${server.port}`);
    expect(capture.text()).not.toMatch(/tok-5d1e-secret|tok-wrong-secret/);
  });

  it('authenticates with an nkey seed', async () => {
    const user = nkeys.createUser();
    const server = await nats({ config: `authorization { users = [ { nkey: "${user.getPublicKey()}" } ] }\n` });
    const seed = new TextDecoder().decode(user.getSeed());
    const capture = captureLog();
    await roundTrip(await open({ server: server.url, nkeySeed: seed }, capture.log));
    expect(capture.text()).toContain('"auth":"nkey"');
    expect(capture.text()).not.toContain(seed);
  });

  it('connects over TLS with a CA from NATS_TLS_CA_CERT_PATH', async () => {
    const tls = makeTestTlsFiles();
    try {
      const server = await nats({ tls: { certFile: tls.certFile, keyFile: tls.keyFile } });
      expect(server.url).toMatch(/^tls:\/\//);
      const nc = await open({ server: server.url, tlsCaCert: tls.caFile });
      await roundTrip(nc);
      await nc.close();
      const untrusted = await connectNats({ server: server.url }, captureLog().log).catch((e: unknown) => e);
      expect(untrusted).toBeInstanceOf(CannotConnect);
    } finally {
      tls.remove();
    }
  });

  it('serves a worker over a NATS server whose certificate it cannot verify only with NATS_TLS_INSECURE=true', async () => {
    const tls = makeTestTlsFiles();
    const runtimes: DistributedRuntime[] = [];
    try {
      const server = await nats({ tls: { certFile: tls.certFile, keyFile: tls.keyFile } });
      // No NATS_TLS_CA_CERT_PATH: the worker has nothing to verify the server's certificate with.
      const env = { DYN_DISCOVERY_BACKEND: 'mem', DYN_REQUEST_PLANE: 'nats', NATS_SERVER: server.url, DYN_LOG: 'error' };
      const space = new MemKvSpace();
      const runtime = async (extra: Record<string, string>) => {
        const made = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, ...extra }), memSpace: space });
        runtimes.push(made);
        return made;
      };
      const strict = runtime({});
      await expect(strict).rejects.toBeInstanceOf(CannotConnect);
      await expect(strict).rejects.toThrow(/unable to verify the first certificate/);
      const worker = await runtime({ NATS_TLS_INSECURE: 'true' });
      await worker.endpoint('tls.worker.generate').serveEndpoint(async function* (request: { n: number }) {
        yield { n: request.n + 1 };
      });
      const caller = await runtime({ NATS_TLS_INSECURE: '1' });
      const client = await caller.endpoint('tls.worker.generate').client();
      await client.waitForInstances({ timeoutMs: 10_000 });
      const items: unknown[] = [];
      for await (const item of client.generate({ n: 41 })) items.push(item);
      expect(items).toEqual([{ n: 42 }]);
    } finally {
      await Promise.all(runtimes.map((r) => r.shutdown()));
      tls.remove();
    }
  });

  it('fails at startup with CannotConnect naming the server (without credentials) when nothing listens', async () => {
    const port = await freePort();
    const err = await connectNats({ server: `nats://bob:hunter2-pw@127.0.0.1:${port}` }, captureLog().log).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CannotConnect);
    expect((err as Error).message).toContain(`nats://127.0.0.1:${port}`);
    expect((err as Error).message).not.toContain('hunter2-pw');
  });

  it('validates options and reads them from Dynamo variable names', () => {
    expect(() => parseNatsConnectionOptions({ server: 'http://127.0.0.1:4222' })).toThrow(/NATS_SERVER must start with nats:\/\/ or tls:\/\//);
    expect(() => parseNatsConnectionOptions({ server: 'http://u:leak-me@host:1' })).toThrow(InvalidArgument);
    expect(() => parseNatsConnectionOptions({ server: 'http://u:leak-me@host:1' })).not.toThrow(/leak-me/);
    expect(() => parseNatsConnectionOptions({ username: 'u' })).toThrow(/NATS_AUTH_USERNAME and NATS_AUTH_PASSWORD must be set together/);
    expect(() => parseNatsConnectionOptions({ tlsCaCert: '/ca.pem' })).toThrow(/need tls:\/\/ URLs/);
    expect(() => parseNatsConnectionOptions({ server: 'tls://h:1', tlsClientCert: '/c.pem' })).toThrow(/must be set together/);

    // What a worker connects with: the runtime config's NATS settings, read from Dynamo's variable names.
    const fromEnv = (env: Record<string, string>) => parseNatsConnectionOptions(loadRuntimeConfig(env).nats);
    const o = fromEnv({
      NATS_SERVER: 'tls://nats.example:4222',
      NATS_AUTH_TOKEN: 't',
      NATS_AUTH_NKEY: '',
      NATS_TLS_CA_CERT_PATH: '/etc/ca.pem',
      NATS_TLS_INSECURE: 'false',
    });
    expect(o).toMatchObject({ server: 'tls://nats.example:4222', token: 't', tlsCaCert: '/etc/ca.pem', tlsInsecure: false });
    expect(o.nkeySeed).toBeUndefined();
    expect(fromEnv({}).server).toBe('nats://localhost:4222');
    expect(fromEnv({ NATS_SERVER: 'tls://h:1', NATS_TLS_INSECURE: 'yes' }).tlsInsecure).toBe(true);
    expect(parseNatsConnectionOptions({ token: '', username: '', password: '' })).toMatchObject({ token: undefined, username: undefined });
    expect(() => fromEnv({ NATS_TLS_INSECURE: 'maybe' })).toThrow(/NATS_TLS_INSECURE/);
  });

  it('rejects an unreadable credentials file or a bad nkey seed without echoing secrets', async () => {
    await expect(connectNats({ credentialsFile: '/nonexistent/user.creds' }, captureLog().log)).rejects.toThrow(
      /NATS_AUTH_CREDENTIALS_FILE '\/nonexistent\/user.creds' cannot be read/,
    );
    const err = await connectNats({ nkeySeed: 'SUnot-a-seed-3e8b' }, captureLog().log).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).not.toContain('SUnot-a-seed-3e8b');
  });

  it('recovers after a NATS restart: the worker subscription and the caller both reconnect', async () => {
    const server = await nats({ user: 'dynamo', pass: 'restart-pw-44b1' });
    const auth = { server: server.url, username: 'dynamo', password: 'restart-pw-44b1' };
    const workerCapture = captureLog();
    const callerCapture = captureLog();
    const workerNc = await open(auth, workerCapture.log);
    const callerNc = await open(auth, callerCapture.log);
    let accepted = 0;
    const plane = new NatsRequestPlaneServer(workerNc, { log: workerCapture.log });
    const transport = await plane.serve('ns', 'comp', 'generate', 0x1234n, () => {
      accepted += 1;
      return '';
    });
    const client = new NatsRequestPlaneClient(callerNc, { requestTimeoutMs: 1_000 });
    await client.send(transport, new Uint8Array(24), {});

    await server.stop();
    // While NATS is down a request fails as CannotConnect, and both sides keep redialing with backoff.
    await expect(client.send(transport, new Uint8Array(24), {})).rejects.toBeInstanceOf(CannotConnect);
    await waitFor('a few failed reconnect attempts', () => /"attempts":3/.test(workerCapture.text()) && /"attempts":3/.test(callerCapture.text()));
    await server.restart();
    await waitFor('a request after the NATS restart', () => client.send(transport, new Uint8Array(24), {}).then(() => true), 20_000);
    expect(accepted).toBeGreaterThanOrEqual(2);
    for (const capture of [workerCapture, callerCapture]) {
      expect(capture.text()).toMatch(/warn NATS connection lost/);
      expect(capture.text()).toMatch(/info NATS connection re-established/);
      expect(capture.text()).not.toContain('restart-pw-44b1');
    }
    await plane.close();
  });
});

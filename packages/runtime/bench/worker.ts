// The child process of request-plane.bench.ts. Two modes, chosen by argv[2]:
//
// - `worker` (default): a Dynamo worker configured from the environment (DYN_* like any worker),
//   serving `bench.worker.generate`: a request `{"n": N}` streams N items `{"token_ids":[i]}`.
// - `floor`: no runtime at all, just plain `node:net` servers for the loopback floor: an echo server
//   (bytes back as they came) and a stream server (reads a u32 N, writes N length-prefixed items).
//
//   With NATS_SERVER set, the floor also answers NATS requests on `bench.floor.echo` (plain nats.js).
//
// It talks to the bench over the IPC channel: it sends {type:'ready', ...} once serving and answers
// {cmd:'mem'} with its memory after a forced GC (start it with --expose-gc), {cmd:'rss'} with its
// memory as it is (no GC: what V8 left committed on its own), {cmd:'cpu'} with its
// process.cpuUsage() and {cmd:'stop'} by exiting. The runtime is imported dynamically so that the
// floor mode does not load it.
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { getHeapSpaceStatistics } from 'node:v8';

type Control = { cmd: 'mem' } | { cmd: 'rss' } | { cmd: 'cpu' } | { cmd: 'stop' };

function send(message: object): void {
  process.send?.(message);
}

function memory(collect: boolean): object {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (collect) {
    // Twice: the first full GC may leave garbage only the second finalizes (weak refs, sockets).
    gc?.();
    gc?.();
  }
  const m = process.memoryUsage();
  // V8's young generation: it grows under sustained load and is given back once the process idles.
  const newSpace = getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0;
  return {
    type: collect ? 'mem' : 'rss',
    gc: collect && gc !== undefined,
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    newSpace,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
  };
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
}

async function floor(): Promise<() => Promise<void>> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  };
  // Echo: every byte straight back; length-prefixed frames stay intact, so the client pairs them.
  const echo = createServer({ noDelay: true }, (socket) => {
    track(socket);
    socket.on('data', (chunk) => socket.write(chunk));
  });
  // Stream: the client sends `u32 count, u8 mode`; we write that many `u32 len, {"token_ids":[i]}`
  // frames, then close, honouring back-pressure. Mode 0: one socket.write per frame, corked in
  // batches of 256 so that a batch leaves in one writev (what the runtime's tick-batched writer
  // does). Mode 1: frames packed into 64 KiB buffers (the wire's own floor).
  const stream = createServer({ noDelay: true }, (socket) => {
    track(socket);
    socket.once('data', (chunk: Buffer) => {
      const n = chunk.readUInt32BE(0);
      const packed = chunk[4] === 1;
      let i = 0;
      const pump = () => {
        let ok = true;
        if (packed) {
          while (ok && i < n) {
            const buf = Buffer.allocUnsafe(64 * 1024);
            let off = 0;
            while (i < n && off + 64 <= buf.length) {
              const len = buf.write(`{"token_ids":[${i}]}`, off + 4, 'latin1');
              buf.writeUInt32BE(len, off);
              off += 4 + len;
              i++;
            }
            ok = socket.write(buf.subarray(0, off));
          }
        } else {
          socket.cork();
          const end = Math.min(n, i + 256);
          while (ok && i < end) {
            const text = `{"token_ids":[${i}]}`;
            const frame = Buffer.allocUnsafe(4 + text.length);
            frame.writeUInt32BE(text.length, 0);
            frame.write(text, 4, 'latin1');
            ok = socket.write(frame);
            i++;
          }
          socket.uncork();
        }
        if (i >= n) socket.end();
        else if (ok) setImmediate(pump);
        else socket.once('drain', pump);
      };
      pump();
    });
  });
  const [echoPort, streamPort] = await Promise.all([listen(echo), listen(stream)]);
  // The NATS floor: a plain nats.js responder answering every request with an empty payload,
  // which is all a Dynamo worker sends back over NATS (the ack).
  const natsServer = process.env.NATS_SERVER;
  const nc = natsServer ? await (await import('@nats-io/transport-node')).connect({ servers: natsServer, noAsyncTraces: true }) : undefined;
  nc?.subscribe('bench.floor.echo', {
    callback: (err, msg) => {
      if (!err) msg.respond();
    },
  });
  await nc?.flush();
  send({ type: 'ready', echoPort, streamPort, nats: nc !== undefined });
  return async () => {
    for (const s of sockets) s.destroy();
    await Promise.all([new Promise((r) => echo.close(r)), new Promise((r) => stream.close(r)), nc?.close()]);
  };
}

async function worker(): Promise<() => Promise<void>> {
  const { DistributedRuntime } = await import('../src/index.js');
  const runtime = await DistributedRuntime.create();
  const endpoint = runtime.namespace('bench').component('worker').endpoint('generate');
  await endpoint.component.createService();
  await endpoint.serveEndpoint(async function* (request: { n?: number }) {
    const n = request.n ?? 1;
    for (let i = 0; i < n; i++) yield { token_ids: [i] };
  });
  send({ type: 'ready', instanceId: runtime.instanceId.toString(16), requestPlane: runtime.config.requestPlane });
  return () => runtime.shutdown({ drainTimeoutMs: 2000 });
}

const mode = process.argv[2] ?? 'worker';
const stop = mode === 'floor' ? await floor() : await worker();
let stopping = false;
const shutdown = () => {
  if (stopping) return;
  stopping = true;
  void stop().finally(() => process.exit(0));
};
process.on('message', (message: Control) => {
  if (message.cmd === 'mem' || message.cmd === 'rss') send(memory(message.cmd === 'mem'));
  else if (message.cmd === 'cpu') send({ type: 'cpu', ...process.cpuUsage() });
  else if (message.cmd === 'stop') shutdown();
});
// The bench going away (crash included) closes the IPC channel: do not outlive it.
process.on('disconnect', shutdown);
process.on('SIGTERM', shutdown);

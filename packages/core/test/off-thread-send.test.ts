import { once } from 'node:events';
import { createServer, type Server, type Socket, connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { sendOffThread } from '@dynamo/core';

/** The descriptor of a connected plain-TCP socket (Node's TCP wrap keeps it in `_handle.fd`). */
const fdOf = (socket: Socket): number => (socket as unknown as { _handle: { fd: number } })._handle.fd;

describe('sendOffThread', () => {
  let server: Server | undefined;
  const sockets: Socket[] = [];

  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
  });

  /** A loopback connection: the client's socket, and a promise of the server's side. */
  async function connection(): Promise<{ client: Socket; peer: Socket }> {
    const accepted = new Promise<Socket>((resolve) => {
      server = createServer((s) => {
        sockets.push(s);
        resolve(s);
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const client = connect({ host: '127.0.0.1', port: (server!.address() as { port: number }).port });
    sockets.push(client);
    await once(client, 'connect');
    return { client, peer: await accepted };
  }

  it("sends the bytes on the socket's descriptor and says all of them went", async () => {
    const { client, peer } = await connection();
    const received: Buffer[] = [];
    peer.on('data', (d: Buffer) => received.push(d));
    const bytes = Buffer.from('{"data":{"token_ids":[7]},"complete_final":false}');
    expect(sendOffThread(fdOf(client), bytes)).toBe(bytes.length);
    // Node's own writes after it arrive after it.
    client.end('and after');
    await once(peer, 'end');
    expect(Buffer.concat(received).toString()).toBe(`${bytes.toString()}and after`);
  });

  it('takes what a full socket accepts without waiting, and nothing on a closed descriptor', async () => {
    const { client, peer } = await connection();
    peer.pause(); // nothing is read: the kernel's buffers fill
    const big = Buffer.alloc(64 << 20, 1);
    const sent = sendOffThread(fdOf(client), big);
    expect(sent).toBeGreaterThan(0);
    expect(sent).toBeLessThan(big.length);
    expect(sendOffThread(1 << 20, Buffer.from('x'))).toBe(0);
  });
});

/**
 * Stock Dynamo's direct ZMQ event framing: four frames — the topic, the publisher id and the
 * sequence (8-byte big-endian each), then a version byte (1) and the envelope's length
 * (4-byte big-endian) before the msgpack envelope itself.
 */

const VERSION = 1;

/** The frames of one publication. */
export function zmqFrames(topic: string, publisherId: bigint, sequence: bigint, envelope: Uint8Array): Buffer[] {
  const id = Buffer.alloc(8);
  id.writeBigUInt64BE(publisherId);
  const seq = Buffer.alloc(8);
  seq.writeBigUInt64BE(sequence);
  const body = Buffer.alloc(5 + envelope.length);
  body.writeUInt8(VERSION, 0);
  body.writeUInt32BE(envelope.length, 1);
  body.set(envelope, 5);
  return [Buffer.from(topic), id, seq, body];
}

/** A received publication, or why it was dropped. */
export type ZmqMessage = { ok: true; publisherId: bigint; sequence: bigint; envelope: Buffer } | { ok: false; reason: string };

/** Reads the frames of one message subscribed to `topic`. */
export function parseZmqFrames(frames: readonly Buffer[], topic: string): ZmqMessage {
  if (frames.length !== 4) return { ok: false, reason: `expected 4 frames, got ${frames.length}` };
  const [t, id, seq, body] = frames as [Buffer, Buffer, Buffer, Buffer];
  if (t.toString() !== topic) return { ok: false, reason: `topic frame ${JSON.stringify(t.toString())} is not ${JSON.stringify(topic)}` };
  if (id.length !== 8 || seq.length !== 8) return { ok: false, reason: 'publisher id and sequence frames must be 8 bytes each' };
  if (body.length < 5 || body[0] !== VERSION) return { ok: false, reason: `unknown frame version ${body[0]}` };
  const length = body.readUInt32BE(1);
  if (length !== body.length - 5) return { ok: false, reason: `frame says ${length} bytes, carries ${body.length - 5}` };
  return { ok: true, publisherId: id.readBigUInt64BE(), sequence: seq.readBigUInt64BE(), envelope: body.subarray(5) };
}

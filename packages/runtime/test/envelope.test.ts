import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '../src/errors.js';
import { ChunkBuffer, decodeTwoPart, encodeTwoPart, encodeTwoPartText, TwoPartDecoder, type TwoPartFrame } from '../src/wire/envelope.js';
import {
  controlHeader,
  decodeControlHeader,
  decodeRequestEnvelope,
  encodeControlHeader,
  encodeRequestEnvelope,
  type ConnectionInfo,
} from '../src/wire/control.js';

const utf8 = (s: string) => Buffer.from(s, 'utf8');

function collect(decoder: TwoPartDecoder, chunks: Uint8Array[]): TwoPartFrame[] {
  const frames: TwoPartFrame[] = [];
  for (const c of chunks) decoder.push(c, (f) => frames.push({ header: Buffer.from(f.header), body: Buffer.from(f.body) }));
  return frames;
}

describe('two-part envelope', () => {
  it('lays out a 24-byte big-endian prefix with a zero checksum, then header, then body', () => {
    const bytes = encodeTwoPart(utf8('{"id":"r1"}'), utf8('{"x":1}'));
    expect(bytes.length).toBe(24 + 11 + 7);
    expect(bytes.readBigUInt64BE(0)).toBe(11n);
    expect(bytes.readBigUInt64BE(8)).toBe(7n);
    expect(bytes.readBigUInt64BE(16)).toBe(0n);
    expect(bytes.subarray(24, 35).toString()).toBe('{"id":"r1"}');
    expect(bytes.subarray(35).toString()).toBe('{"x":1}');
  });

  it('round-trips header-only, body-only, empty and non-ASCII messages', () => {
    for (const [h, b] of [
      ['"sentinel"', ''],
      ['', '{"complete_final":true}'],
      ['', ''],
      ['{"k":"ünïcødé ✓"}', '{"text":"日本語"}'],
    ] as const) {
      const viaBytes = encodeTwoPart(utf8(h), utf8(b));
      expect(encodeTwoPartText(h, b)).toEqual(viaBytes);
      const { header, body } = decodeTwoPart(viaBytes);
      expect(header.toString()).toBe(h);
      expect(body.toString()).toBe(b);
    }
  });

  it('ignores a nonzero checksum written by a debug-built peer', () => {
    const bytes = encodeTwoPart(utf8('h'), utf8('b'));
    bytes.writeBigUInt64BE(0xdeadbeefn, 16);
    expect(decodeTwoPart(bytes).body.toString()).toBe('b');
  });

  it('rejects a message whose declared lengths do not match its size', () => {
    const bytes = encodeTwoPart(utf8('header'), utf8('body'));
    expect(() => decodeTwoPart(bytes.subarray(0, bytes.length - 1))).toThrow(/declares header_len=6 and body_len=4/);
    expect(() => decodeTwoPart(Buffer.concat([bytes, utf8('x')]))).toThrow(InvalidArgument);
    expect(() => decodeTwoPart(bytes.subarray(0, 10))).toThrow(/shorter than its 24-byte prefix/);
  });

  it('decodes a stream incrementally across every possible chunk split', () => {
    const messages = [
      ['{"subject":"s","stream_type":"response"}', ''],
      ['{"error":null}', ''],
      ['', '{"data":{"n":1},"complete_final":false}'],
      ['', '{"data":{"n":2},"complete_final":false}'],
      ['', '{"complete_final":true}'],
      ['"sentinel"', ''],
      ['h', 'b'],
    ] as const;
    const stream = Buffer.concat(messages.map(([h, b]) => encodeTwoPartText(h, b)));
    const expected = messages.map(([h, b]) => [h, b]);
    for (let a = 0; a <= stream.length; a++) {
      for (const b of [a, Math.min(stream.length, a + 1), Math.min(stream.length, a + 25), stream.length]) {
        const frames = collect(new TwoPartDecoder(), [stream.subarray(0, a), stream.subarray(a, b), stream.subarray(b)]);
        expect(frames.map((f) => [f.header.toString(), f.body.toString()])).toEqual(expected);
      }
    }
  });

  it('decodes a stream fed one byte at a time and reports an unfinished frame', () => {
    const stream = Buffer.concat([encodeTwoPartText('a', 'b'), encodeTwoPartText('', 'c'.repeat(1000))]);
    const decoder = new TwoPartDecoder();
    const frames = collect(
      decoder,
      [...stream.subarray(0, stream.length - 3)].map((byte) => Uint8Array.of(byte)),
    );
    expect(frames).toHaveLength(1);
    expect(decoder.buffered).toBe(24 + 997);
    expect(collect(decoder, [stream.subarray(stream.length - 3)])[0]!.body.toString()).toBe('c'.repeat(1000));
    expect(decoder.buffered).toBe(0);
  });

  it('rejects an oversized frame before buffering it, and stays failed', () => {
    const decoder = new TwoPartDecoder({ maxFrameBytes: 100 });
    const ok = encodeTwoPartText('', 'x'.repeat(100));
    const big = encodeTwoPartText('', 'x'.repeat(101));
    const frames: TwoPartFrame[] = [];
    // The good frame before the bad one is still delivered.
    expect(() => decoder.push(Buffer.concat([ok, big.subarray(0, 24)]), (f) => frames.push(f))).toThrow(/body_len=101, over the 100-byte frame limit/);
    expect(frames).toHaveLength(1);
    expect(() => decoder.push(ok, () => {})).toThrow(/over the 100-byte frame limit/);
  });

  it('calls garbage lengths garbage', () => {
    const decoder = new TwoPartDecoder();
    expect(() => decoder.push(Buffer.alloc(24, 0xff), () => {})).toThrow(/look like garbage/);
  });

  it('ChunkBuffer copies only when a message spans chunks', () => {
    const buf = new ChunkBuffer();
    const a = utf8('abc');
    buf.push(a);
    expect(buf.contiguous()).toBe(a);
    buf.push(utf8('def'));
    expect(buf.contiguous().toString()).toBe('abcdef');
    buf.consume(4);
    expect(buf.contiguous().toString()).toBe('ef');
    expect(buf.size).toBe(2);
  });
});

describe('request control header', () => {
  const info: ConnectionInfo = {
    transport: 'tcp_server',
    info: { address: '10.0.0.5:41234', subject: 'b6f1c1d0-3c5e-4e43-9a3c-1f2a07694d9a', context: 'req-1', stream_type: 'response' },
  };

  function wire(overrides: Record<string, unknown> = {}): Buffer {
    return utf8(
      JSON.stringify({
        id: 'req-1',
        request_type: 'single_in',
        response_type: 'many_out',
        payload_codec: 'json',
        connection_info: { transport: 'tcp_server', info: JSON.stringify(info.info) },
        ...overrides,
      }),
    );
  }

  it('double-encodes connection_info.info on the wire and round-trips', () => {
    const header = controlHeader('req-1', info, { traceparent: '00-abc' });
    const bytes = encodeControlHeader(header);
    const raw = JSON.parse(bytes.toString()) as { connection_info: { info: unknown }; metadata: unknown };
    expect(typeof raw.connection_info.info).toBe('string');
    expect(JSON.parse(raw.connection_info.info as string)).toEqual(info.info);
    expect(raw.metadata).toEqual({ traceparent: '00-abc' });
    expect(decodeControlHeader(bytes)).toEqual(header);
  });

  it('omits empty metadata and accepts a missing payload_codec', () => {
    const bytes = encodeControlHeader(controlHeader('req-1', info, {}));
    expect(JSON.parse(bytes.toString())).not.toHaveProperty('metadata');
    const decoded = decodeControlHeader(wire({ payload_codec: undefined }));
    expect(decoded.payload_codec).toBeUndefined();
  });

  it('reads a u64 send timestamp losslessly', () => {
    const text = wire().toString().replace(/}$/, ',"frontend_send_ts_ns":1767225600123456789}');
    expect(decodeControlHeader(utf8(text)).frontend_send_ts_ns).toBe(1767225600123456789n);
  });

  it.each([
    [{ id: 5 }, /control\.id/],
    [{ request_type: 'many' }, /control\.request_type/],
    [{ response_type: 'single_out' }, /control\.response_type/],
    [{ payload_codec: 'cbor' }, /control\.payload_codec/],
    [{ connection_info: { transport: 'tcp_response_mux_v1', info: '{}' } }, /control\.connection_info\.transport/],
    [{ connection_info: { transport: 'tcp_server', info: { address: 'x' } } }, /control\.connection_info\.info/],
    [{ connection_info: { transport: 'tcp_server', info: '{not json' } }, /control\.connection_info\.info: not a JSON text/],
    [
      { connection_info: { transport: 'tcp_server', info: JSON.stringify({ ...info.info, address: 'nohost' }) } },
      /control\.connection_info\.info\.address: expected HOST:PORT/,
    ],
    [
      { connection_info: { transport: 'tcp_server', info: JSON.stringify({ ...info.info, stream_type: 'request' }) } },
      /control\.connection_info\.info\.stream_type/,
    ],
    [
      { connection_info: { transport: 'tcp_server', info: JSON.stringify({ ...info.info, context: 'other' }) } },
      /control\.connection_info\.info\.context: 'other' does not match control\.id 'req-1'/,
    ],
    [{ metadata: ['a'] }, /control\.metadata/],
  ])('names the bad field: %j', (overrides, message) => {
    expect(() => decodeControlHeader(wire(overrides))).toThrow(InvalidArgument);
    expect(() => decodeControlHeader(wire(overrides))).toThrow(message);
  });

  it('rejects non-JSON and oversized headers', () => {
    expect(() => decodeControlHeader(utf8('{'))).toThrow(/control: header is not valid JSON/);
    expect(() => decodeControlHeader(Buffer.alloc(128 * 1024 + 1, 0x20))).toThrow(/over the 131072-byte limit/);
  });

  it('encodes and decodes a whole request envelope', () => {
    const body = utf8('{"token_ids":[1,2,3]}');
    const envelope = encodeRequestEnvelope(controlHeader('req-1', info), body);
    const decoded = decodeRequestEnvelope(envelope);
    expect(decoded.control.id).toBe('req-1');
    expect(decoded.control.connection_info.info.subject).toBe(info.info.subject);
    expect(decoded.body.toString()).toBe('{"token_ids":[1,2,3]}');
    expect(() => decodeRequestEnvelope(encodeTwoPart(Buffer.alloc(0), body))).toThrow(/no header part/);
  });
});

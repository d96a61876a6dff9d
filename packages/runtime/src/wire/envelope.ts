/**
 * Dynamo's two-part codec: every request envelope and every frame on the call-home response
 * socket is a 24-byte big-endian prefix (u64 `header_len`, u64 `body_len`, u64 `checksum`)
 * followed by the header bytes and the body bytes.
 *
 * Stock Dynamo fills the checksum only in debug builds and verifies it only when nonzero, so we
 * always write 0 and never read it: verifying would make us reject debug-built peers for no gain
 * on a reliable byte stream.
 */

import { InvalidArgument } from '../errors.js';

/** Size of the fixed prefix in front of every two-part message. */
export const TWO_PART_PREFIX_BYTES = 24;

/** Dynamo's cap on one message, `header_len + body_len` (32 MiB; `DYN_TCP_MAX_MESSAGE_SIZE` changes the request plane's). */
export const DEFAULT_MAX_FRAME_BYTES = 32 * 1024 * 1024;

const U32 = 2 ** 32;

/** One decoded two-part message. Empty parts are zero-length buffers, never `undefined`. */
export interface TwoPartFrame {
  header: Buffer;
  body: Buffer;
}

// Shared so that header-only and body-only frames (almost every response-stream frame) do not
// allocate a view for the part that is absent. Zero-length, so nobody can write into it.
const EMPTY = Buffer.alloc(0);

function writePrefix(out: Buffer, headerLen: number, bodyLen: number): void {
  // Two u32 writes per u64: avoids BigInt on the hot path; lengths never reach 2^53.
  out.writeUInt32BE(Math.floor(headerLen / U32), 0);
  out.writeUInt32BE(headerLen >>> 0, 4);
  out.writeUInt32BE(Math.floor(bodyLen / U32), 8);
  out.writeUInt32BE(bodyLen >>> 0, 12);
  out.writeUInt32BE(0, 16);
  out.writeUInt32BE(0, 20);
}

/** Encodes `header` and `body` as one two-part message in a single allocation (checksum 0). */
export function encodeTwoPart(header: Uint8Array, body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(TWO_PART_PREFIX_BYTES + header.length + body.length);
  writePrefix(out, header.length, body.length);
  out.set(header, TWO_PART_PREFIX_BYTES);
  out.set(body, TWO_PART_PREFIX_BYTES + header.length);
  return out;
}

/**
 * Encodes UTF-8 text parts as one two-part message, writing the text straight into the output
 * buffer (no intermediate `Buffer.from` per part). Use `''` for an absent part.
 */
export function encodeTwoPartText(header: string, body: string): Buffer {
  const headerLen = header.length === 0 ? 0 : Buffer.byteLength(header, 'utf8');
  const bodyLen = body.length === 0 ? 0 : Buffer.byteLength(body, 'utf8');
  const out = Buffer.allocUnsafe(TWO_PART_PREFIX_BYTES + headerLen + bodyLen);
  writePrefix(out, headerLen, bodyLen);
  if (headerLen > 0) out.write(header, TWO_PART_PREFIX_BYTES, headerLen, 'utf8');
  if (bodyLen > 0) out.write(body, TWO_PART_PREFIX_BYTES + headerLen, bodyLen, 'utf8');
  return out;
}

/**
 * Reads the declared `header_len` and `body_len` at `offset` and checks them against `maxBytes`.
 * A u64 whose high word is set cannot be a real length here, so it is reported as garbage rather
 * than converted (which would lose precision).
 */
function readLengths(buf: Buffer, offset: number, maxBytes: number): [number, number] {
  const headerHi = buf.readUInt32BE(offset);
  const headerLen = headerHi * U32 + buf.readUInt32BE(offset + 4);
  const bodyHi = buf.readUInt32BE(offset + 8);
  const bodyLen = bodyHi * U32 + buf.readUInt32BE(offset + 12);
  if (headerLen + bodyLen > maxBytes) {
    throw new InvalidArgument(
      `two-part frame declares header_len=${headerLen} and body_len=${bodyLen}, over the ${maxBytes}-byte frame limit` +
        (headerHi !== 0 || bodyHi !== 0 ? ' (the length fields look like garbage, not a Dynamo frame)' : ''),
    );
  }
  return [headerLen, bodyLen];
}

function view(buf: Buffer, start: number, end: number): Buffer {
  return start === end ? EMPTY : buf.subarray(start, end);
}

/**
 * Decodes exactly one two-part message occupying all of `bytes` (a request-plane payload).
 * The returned parts are views into `bytes`, not copies.
 *
 * @throws InvalidArgument when the prefix is short, the lengths exceed `maxBytes`, or the
 *   declared lengths do not add up to the message size.
 */
export function decodeTwoPart(bytes: Uint8Array, maxBytes = DEFAULT_MAX_FRAME_BYTES): TwoPartFrame {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < TWO_PART_PREFIX_BYTES) {
    throw new InvalidArgument(`two-part message is ${buf.length} bytes, shorter than its ${TWO_PART_PREFIX_BYTES}-byte prefix`);
  }
  const [headerLen, bodyLen] = readLengths(buf, 0, maxBytes);
  const expected = TWO_PART_PREFIX_BYTES + headerLen + bodyLen;
  if (expected !== buf.length) {
    throw new InvalidArgument(
      `two-part message declares header_len=${headerLen} and body_len=${bodyLen} (${expected} bytes with prefix) but is ${buf.length} bytes`,
    );
  }
  const bodyStart = TWO_PART_PREFIX_BYTES + headerLen;
  return { header: view(buf, TWO_PART_PREFIX_BYTES, bodyStart), body: view(buf, bodyStart, expected) };
}

/**
 * Bytes received from a stream and not yet consumed. Chunks are only concatenated once enough
 * bytes for the next message are present, so a large message arriving in many small reads is
 * copied once, not once per read.
 */
export class ChunkBuffer {
  #chunks: Buffer[] = [];
  #size = 0;

  /** Number of buffered bytes. */
  get size(): number {
    return this.#size;
  }

  /** Appends a chunk (kept by reference; callers must not mutate it afterwards). */
  push(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.#size += chunk.length;
  }

  /** Everything buffered as one contiguous buffer (copies only if it spans several chunks). */
  contiguous(): Buffer {
    if (this.#chunks.length === 0) return EMPTY;
    if (this.#chunks.length > 1) this.#chunks = [Buffer.concat(this.#chunks, this.#size)];
    return this.#chunks[0]!;
  }

  /** Drops the first `n` bytes; call after {@link contiguous}. */
  consume(n: number): void {
    if (n === 0) return;
    const first = this.contiguous();
    if (n >= first.length) {
      this.#chunks = [];
      this.#size = 0;
    } else {
      this.#chunks[0] = first.subarray(n);
      this.#size -= n;
    }
  }

  /** Forgets everything buffered. */
  clear(): void {
    this.#chunks = [];
    this.#size = 0;
  }
}

/** Options for {@link TwoPartDecoder}. */
export interface TwoPartDecoderOptions {
  /** Largest accepted `header_len + body_len`; default {@link DEFAULT_MAX_FRAME_BYTES}. */
  maxFrameBytes?: number;
}

/**
 * Incremental decoder for a byte stream of back-to-back two-part messages (the call-home socket).
 * Feed it chunks as they arrive; it hands over every frame completed so far, in order. Frames are
 * views into the received data where possible, so decoding costs no copy per frame.
 *
 * After it throws (oversized or garbage lengths) the stream is unrecoverable: the decoder stays
 * failed and rethrows on every later {@link push}.
 */
export class TwoPartDecoder {
  readonly #max: number;
  readonly #pending = new ChunkBuffer();
  // Total size (prefix included) of the frame being waited for, once its prefix has been read.
  #need = TWO_PART_PREFIX_BYTES;
  #failure: Error | undefined;
  #stopped = false;

  constructor(options: TwoPartDecoderOptions = {}) {
    this.#max = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
  }

  /**
   * Called from `onFrame`: decoding stops after this frame, and the bytes after it stay for
   * {@link takeRest} (someone else reads the stream from here on).
   */
  stop(): void {
    this.#stopped = true;
  }

  /** The bytes not decoded, handed over once; the decoder is empty after it. */
  takeRest(): Buffer {
    const rest = this.#pending.contiguous();
    this.#pending.clear();
    this.#need = TWO_PART_PREFIX_BYTES;
    return rest;
  }

  /** Bytes received that do not yet form a complete frame (non-zero at EOF means truncation). */
  get buffered(): number {
    return this.#pending.size;
  }

  /**
   * Adds `chunk` and calls `onFrame` for each frame it completes, in order. A callback rather
   * than a returned array so that frames decoded before a bad length are still delivered before
   * the error, and so a busy stream allocates no array per chunk. If `onFrame` throws, the frames
   * already delivered stay consumed and the error propagates.
   *
   * @throws InvalidArgument when a frame declares lengths over the limit.
   */
  push(chunk: Uint8Array, onFrame: (frame: TwoPartFrame) => void): void {
    if (this.#failure) throw this.#failure;
    this.#pending.push(chunk);
    if (this.#pending.size < this.#need) return;
    const buf = this.#pending.contiguous();
    let offset = 0;
    try {
      while (buf.length - offset >= TWO_PART_PREFIX_BYTES) {
        let headerLen: number;
        let bodyLen: number;
        try {
          [headerLen, bodyLen] = readLengths(buf, offset, this.#max);
        } catch (err) {
          this.#failure = err as Error;
          throw err;
        }
        const end = offset + TWO_PART_PREFIX_BYTES + headerLen + bodyLen;
        if (end > buf.length) {
          this.#need = end - offset;
          return;
        }
        const bodyStart = offset + TWO_PART_PREFIX_BYTES + headerLen;
        const frame = { header: view(buf, offset + TWO_PART_PREFIX_BYTES, bodyStart), body: view(buf, bodyStart, end) };
        offset = end;
        this.#need = TWO_PART_PREFIX_BYTES;
        onFrame(frame);
        if (this.#stopped) return;
      }
    } finally {
      if (this.#failure) this.#pending.clear();
      else this.#pending.consume(offset);
    }
  }
}

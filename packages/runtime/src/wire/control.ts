/**
 * The request control header: the JSON header part of every request envelope. It names the
 * request (`id` = the caller's context id), its shape (`single_in` / `many_out`), the payload codec
 * and where the worker must call home with the response stream.
 *
 * On the wire `connection_info.info` is a JSON *string* holding another JSON object (Dynamo
 * double-encodes it). Only this module sees that: callers build and read {@link ControlHeader}
 * with `info` as an object.
 */

import { z } from 'zod';
import { InvalidArgument } from '../errors.js';
import { parseJson, stringifyJson } from '../json.js';
import { describeIssues } from '../validate.js';
import { decodeTwoPart, encodeTwoPart, type TwoPartFrame } from './envelope.js';

/** Dynamo's limit on the control header of a request envelope. */
export const MAX_CONTROL_HEADER_BYTES = 128 * 1024;

/** Where and how the worker calls home: the parsed content of `connection_info.info`. */
export const CallHomeInfoSchema = z.object({
  /** `HOST:PORT` of the caller's response stream server. */
  address: z.string().regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):\d{1,5}$/, 'expected HOST:PORT'),
  /** One-time stream id the worker presents in its handshake. */
  subject: z.string().min(1),
  /** The request's context id; must equal the control header's `id`. */
  context: z.string(),
  stream_type: z.literal('response'),
  /**
   * Not stock's: the caller accepts a connection that sends its handshake up to this long after
   * connecting, without logging it, so the worker may dial ahead (our frontend sets it).
   */
  handshake_timeout_ms: z.number().int().positive().optional(),
});

/** Parsed `connection_info.info`. */
export type CallHomeInfo = z.infer<typeof CallHomeInfoSchema>;

/** `connection_info` with `info` parsed; only the per-request call-home transport is supported. */
export interface ConnectionInfo {
  transport: 'tcp_server';
  info: CallHomeInfo;
}

const u64 = z.union([z.number().int().nonnegative(), z.bigint().nonnegative()]);

const WireControlSchema = z.object({
  id: z.string().min(1),
  request_type: z.enum(['single_in', 'many_in']),
  response_type: z.literal('many_out'),
  // msgpack is a legal wire value (stock >= 1.2); accepting it here lets a JSON-only worker
  // answer with an error prologue instead of dropping the request silently.
  payload_codec: z.enum(['json', 'msgpack']).optional(),
  connection_info: z.object({
    transport: z.literal('tcp_server'),
    info: z.string(),
  }),
  metadata: z.record(z.string(), z.unknown()).optional(),
  frontend_send_ts_ns: u64.optional(),
  request_stream_connection_info: z.unknown().optional(),
});

/** A decoded request control header. Field names are Dynamo's wire names. */
export interface ControlHeader {
  /** Request id: the caller's context id. */
  id: string;
  request_type: 'single_in' | 'many_in';
  response_type: 'many_out';
  /** Codec of the request body and of the response frames; absent means `json`. */
  payload_codec?: 'json' | 'msgpack' | undefined;
  connection_info: ConnectionInfo;
  /** Per-request metadata; omitted on the wire when empty. */
  metadata?: Record<string, unknown> | undefined;
  /** Caller's send timestamp (ns), for latency metrics. */
  frontend_send_ts_ns?: number | bigint | undefined;
  /** Only for `many_in` requests, which this port does not serve; passed through untouched. */
  request_stream_connection_info?: unknown;
}

/** Builds the header for an ordinary streaming request (`single_in` / `many_out`, JSON body). */
export function controlHeader(id: string, connectionInfo: ConnectionInfo, metadata?: Record<string, unknown>): ControlHeader {
  const header: ControlHeader = {
    id,
    request_type: 'single_in',
    response_type: 'many_out',
    payload_codec: 'json',
    connection_info: connectionInfo,
  };
  if (metadata && Object.keys(metadata).length > 0) header.metadata = metadata;
  return header;
}

/** Serializes a control header to its wire JSON (with `info` double-encoded). */
export function encodeControlHeader(header: ControlHeader): Buffer {
  const wire: Record<string, unknown> = {
    id: header.id,
    request_type: header.request_type,
    response_type: header.response_type,
  };
  if (header.payload_codec !== undefined) wire.payload_codec = header.payload_codec;
  const info = header.connection_info.info;
  wire.connection_info = {
    transport: header.connection_info.transport,
    info: JSON.stringify({
      address: info.address,
      subject: info.subject,
      context: info.context,
      stream_type: info.stream_type,
      ...(info.handshake_timeout_ms === undefined ? {} : { handshake_timeout_ms: info.handshake_timeout_ms }),
    }),
  };
  if (header.metadata && Object.keys(header.metadata).length > 0) wire.metadata = header.metadata;
  if (header.frontend_send_ts_ns !== undefined) wire.frontend_send_ts_ns = header.frontend_send_ts_ns;
  if (header.request_stream_connection_info !== undefined) {
    wire.request_stream_connection_info = header.request_stream_connection_info;
  }
  return Buffer.from(stringifyJson(wire), 'utf8');
}

/**
 * Parses and validates a control header.
 *
 * @throws InvalidArgument naming the offending field, e.g.
 *   `control.connection_info.transport: Invalid input: expected "tcp_server"`.
 */
export function decodeControlHeader(bytes: Uint8Array): ControlHeader {
  if (bytes.length > MAX_CONTROL_HEADER_BYTES) {
    throw new InvalidArgument(`control: header is ${bytes.length} bytes, over the ${MAX_CONTROL_HEADER_BYTES}-byte limit`);
  }
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  let raw: unknown;
  try {
    raw = parseJson(text);
  } catch (err) {
    throw new InvalidArgument(`control: header is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const wire = WireControlSchema.safeParse(raw);
  if (!wire.success) throw new InvalidArgument(describeIssues('control', wire.error), { cause: wire.error });

  let infoRaw: unknown;
  try {
    infoRaw = JSON.parse(wire.data.connection_info.info);
  } catch (err) {
    throw new InvalidArgument(`control.connection_info.info: not a JSON text: ${(err as Error).message}`, { cause: err });
  }
  const info = CallHomeInfoSchema.safeParse(infoRaw);
  if (!info.success) {
    throw new InvalidArgument(describeIssues('control.connection_info.info', info.error), { cause: info.error });
  }
  if (info.data.context !== wire.data.id) {
    // Dynamo refuses this too: the worker would stream into another request's context.
    throw new InvalidArgument(`control.connection_info.info.context: '${info.data.context}' does not match control.id '${wire.data.id}'`);
  }

  const header: ControlHeader = {
    id: wire.data.id,
    request_type: wire.data.request_type,
    response_type: wire.data.response_type,
    connection_info: { transport: 'tcp_server', info: info.data },
  };
  if (wire.data.payload_codec !== undefined) header.payload_codec = wire.data.payload_codec;
  if (wire.data.metadata !== undefined) header.metadata = wire.data.metadata;
  if (wire.data.frontend_send_ts_ns !== undefined) header.frontend_send_ts_ns = wire.data.frontend_send_ts_ns;
  if (wire.data.request_stream_connection_info !== undefined) {
    header.request_stream_connection_info = wire.data.request_stream_connection_info;
  }
  return header;
}

/** A request envelope split into its validated control header and its raw body. */
export interface RequestEnvelope {
  control: ControlHeader;
  /** The request, encoded with `control.payload_codec` (JSON unless stated otherwise). */
  body: Buffer;
}

/** Encodes a complete request envelope: two-part message of control header + body. */
export function encodeRequestEnvelope(control: ControlHeader, body: Uint8Array): Buffer {
  return encodeTwoPart(encodeControlHeader(control), body);
}

/**
 * Decodes a request envelope as received by a worker.
 *
 * @throws InvalidArgument for a malformed two-part message or control header.
 */
export function decodeRequestEnvelope(envelope: Uint8Array): RequestEnvelope {
  const frame: TwoPartFrame = decodeTwoPart(envelope);
  if (frame.header.length === 0) throw new InvalidArgument('control: request envelope has no header part');
  return { control: decodeControlHeader(frame.header), body: frame.body };
}

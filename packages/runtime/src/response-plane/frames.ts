/**
 * The frames of Dynamo's call-home response stream, each one two-part message:
 *
 * - handshake (worker → caller, header only): `{"subject":"…","stream_type":"response"}`
 * - prologue (worker → caller, header only): `{"error":null}` or `{"error":"msg"}`
 * - data (worker → caller, body only): `{"data":X,"complete_final":false}`, then the end marker
 *   `{"complete_final":true}`
 * - sentinel (worker → caller, header only): the JSON string `"sentinel"`
 * - stop / kill (caller → worker, header only): the JSON strings `"stop"` / `"kill"`
 */

import { DynamoException, InvalidArgument } from '../errors.js';
import { parseJson, stringifyJson } from '../json.js';
import { encodeTwoPartText } from '../wire/envelope.js';

/** A violation of the call-home protocol by the peer (not a lost connection). */
export class ResponseProtocolError extends DynamoException {}

// Frames that never change are encoded once. Sockets never mutate what they are given, so one
// instance can be written to any number of them.

/** Worker → caller after the end marker of a normally completed stream. */
export const SENTINEL_FRAME = encodeTwoPartText('"sentinel"', '');
/** Caller → worker: stop generating gracefully. */
export const STOP_FRAME = encodeTwoPartText('"stop"', '');
/** Caller → worker: stop at once, nothing more is wanted. */
export const KILL_FRAME = encodeTwoPartText('"kill"', '');
/** The data frame that marks a complete stream. */
export const END_FRAME = encodeTwoPartText('', '{"complete_final":true}');

/** Which header-only control word a header holds, if any (`"stop"` → `stop`). */
export function controlWord(header: Buffer): 'sentinel' | 'stop' | 'kill' | undefined {
  // Compare bytes rather than parsing JSON: these frames are exact strings on the wire.
  if (header.length < 6 || header.length > 10 || header[0] !== 0x22) return undefined;
  const word = header.toString('latin1');
  if (word === '"sentinel"') return 'sentinel';
  if (word === '"stop"') return 'stop';
  if (word === '"kill"') return 'kill';
  return undefined;
}

/** The worker's first frame: which pending stream it is answering. */
export function encodeHandshake(subject: string): Buffer {
  return encodeTwoPartText(JSON.stringify({ subject, stream_type: 'response' }), '');
}

/** Reads a handshake header; throws {@link ResponseProtocolError} if it is not one. */
export function parseHandshake(header: Buffer): { subject: string } {
  let value: unknown;
  try {
    value = JSON.parse(header.toString('utf8'));
  } catch {
    throw new ResponseProtocolError('handshake header is not JSON');
  }
  const v = value as { subject?: unknown; stream_type?: unknown } | null;
  if (typeof v !== 'object' || v === null || typeof v.subject !== 'string') {
    throw new ResponseProtocolError('handshake header has no string subject');
  }
  if (v.stream_type !== 'response') {
    throw new ResponseProtocolError(`handshake stream_type is ${JSON.stringify(v.stream_type)}, expected "response"`);
  }
  return { subject: v.subject };
}

/** The prologue: `null` when the handler started, else the reason it could not. */
export function encodePrologue(error: string | null): Buffer {
  return encodeTwoPartText(JSON.stringify({ error }), '');
}

/** Reads a prologue header; returns its error text or `null`. */
export function parsePrologue(header: Buffer): string | null {
  let value: unknown;
  try {
    value = JSON.parse(header.toString('utf8'));
  } catch {
    throw new ResponseProtocolError('prologue header is not JSON');
  }
  if (typeof value !== 'object' || value === null || !('error' in value)) {
    throw new ResponseProtocolError('prologue header has no "error" field');
  }
  const error = (value as { error: unknown }).error;
  if (error === null) return null;
  // Newer workers may add a structured `typed_error`; the text in `error` is what we surface.
  return typeof error === 'string' ? error : JSON.stringify(error);
}

// A run of 16+ digits is the only thing that can be an integer JSON.parse would round. Testing
// for it natively first keeps the common frame on the plain, fast JSON.parse path.
const longDigits = /\d{16}/;

/**
 * Serializes one item as JSON: plain `JSON.stringify` (no replacer, the fast path), falling back
 * to the bigint-aware writer only for values that contain a `bigint`.
 */
export function itemJson(item: unknown): string {
  if (item === undefined || item === null) throw new InvalidArgument('a response item must not be null or undefined');
  let text: string | undefined;
  try {
    text = JSON.stringify(item);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
    text = stringifyJson(item);
  }
  if (text === undefined) throw new InvalidArgument(`a response item of type ${typeof item} is not JSON-serializable`);
  return text;
}

/**
 * A data frame carrying one item already serialized as JSON text. The wrapper is concatenated
 * around the text, so the item is serialized exactly once.
 */
export function encodeItemFrame(json: string): Buffer {
  return encodeTwoPartText('', `{"data":${json},"complete_final":false}`);
}

/** A decoded data frame: an item, or the end marker. */
export type DataFrame = { end: false; data: unknown } | { end: true };

const END: DataFrame = { end: true };

/** Parses one data-frame body (the stream wrapper) once, returning the item or the end marker. */
export function parseDataFrame(body: Buffer): DataFrame {
  const text = body.toString('utf8');
  let value: unknown;
  try {
    value = longDigits.test(text) ? parseJson(text) : JSON.parse(text);
  } catch {
    throw new ResponseProtocolError(`data frame is not JSON (${body.length} bytes)`);
  }
  if (typeof value !== 'object' || value === null) throw new ResponseProtocolError('data frame is not a JSON object');
  const wrapper = value as { data?: unknown; complete_final?: unknown };
  if (wrapper.complete_final === true) {
    return END;
  }
  // Dynamo reads `data` as an Option: null and absent both mean "no item", which is only legal
  // on the end marker.
  if (wrapper.data === undefined || wrapper.data === null) {
    throw new ResponseProtocolError('data frame has neither data nor complete_final');
  }
  return { end: false, data: wrapper.data };
}

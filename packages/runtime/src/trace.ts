/**
 * W3C Trace Context (`traceparent` / `tracestate`) as Dynamo carries it: in the request plane's
 * headers. The worker reads it into the request's {@link Context}; a call made with that context
 * continues the trace with a new span id.
 */
import { randomBytes } from 'node:crypto';

/** The request-plane header names of W3C Trace Context. */
export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

/** A parsed `traceparent` (version 00), plus the `tracestate` that travelled with it. */
export interface TraceContext {
  /** 32 lowercase hex digits, not all zero. */
  readonly traceId: string;
  /** The caller's span: 16 lowercase hex digits, not all zero. */
  readonly parentId: string;
  /** Trace flags; bit 0 = sampled. */
  readonly flags: number;
  /** The vendor-specific `tracestate` list, passed on unchanged. */
  readonly tracestate?: string;
}

const traceparentPattern = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * Parses a `traceparent` header. Returns undefined for anything the W3C spec says to ignore: a
 * malformed value, version `ff`, an all-zero trace or parent id, or a version-00 value with
 * trailing data. Later versions are read by their version-00 prefix, as the spec asks.
 */
export function parseTraceparent(traceparent: string | undefined, tracestate?: string): TraceContext | undefined {
  if (traceparent === undefined) return undefined;
  const m = traceparentPattern.exec(traceparent.trim());
  if (!m) return undefined;
  const [, version, traceId, parentId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (/^0+$/.test(traceId) || /^0+$/.test(parentId)) return undefined;
  const state = tracestate?.trim();
  return { traceId, parentId, flags: Number.parseInt(flags, 16), ...(state ? { tracestate: state } : {}) };
}

/** A new 16-hex-digit span id (never all zero). */
export function newSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (id !== '0000000000000000') return id;
  }
}

/**
 * The headers that continue `trace` in a downstream call: same trace id and flags, `spanId` as the
 * new parent (a fresh one when omitted), and the `tracestate` unchanged.
 */
export function traceHeaders(trace: TraceContext, spanId: string = newSpanId()): Record<string, string> {
  const headers: Record<string, string> = {
    [TRACEPARENT]: `00-${trace.traceId}-${spanId}-${trace.flags.toString(16).padStart(2, '0')}`,
  };
  if (trace.tracestate) headers[TRACESTATE] = trace.tracestate;
  return headers;
}

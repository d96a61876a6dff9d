import { z } from 'zod';
import { parseJson, stringifyJson } from '../json.js';
import type { EventScope } from './subject.js';

/** Bucket where each event publisher advertises how to reach it. */
export const EVENT_CHANNELS_BUCKET = 'v1/event_channels';
/** Bucket where each KV event publisher names the worker (and rank) its events describe. */
export const EVENT_SOURCES_BUCKET = 'v1/event_sources';

const u64 = z.union([z.bigint(), z.number().int().nonnegative()]).transform((v) => BigInt(v));

const ScopeSchema = z.looseObject({
  kind: z.literal('endpoint'),
  endpoint: z.looseObject({ namespace: z.string(), component: z.string(), name: z.string() }),
});

/** How a publisher's events travel: its own ZMQ PUB socket, or NATS subjects under a prefix. */
export const EventTransportSchema = z.discriminatedUnion('kind', [
  z.looseObject({ kind: z.literal('Zmq'), config: z.looseObject({ endpoint: z.string().regex(/^tcp:\/\//, 'must be a tcp:// address') }) }),
  z.looseObject({ kind: z.literal('Nats'), config: z.looseObject({ subject_prefix: z.string() }) }),
]);
export type EventTransport = z.output<typeof EventTransportSchema>;

/** Stock's `{"type":"EventChannel", ...}` record. Unknown fields are kept. */
export const EventChannelRecordSchema = z.looseObject({
  type: z.literal('EventChannel'),
  scope: ScopeSchema,
  topic: z.string(),
  instance_id: u64,
  transport: EventTransportSchema,
});
export type EventChannelRecord = z.output<typeof EventChannelRecordSchema>;

/** Stock's `{"type":"EventSource", ...}` record: which worker rank a KV event publisher speaks for. */
export const EventSourceRecordSchema = z.looseObject({
  type: z.literal('EventSource'),
  scope: ScopeSchema,
  topic: z.string(),
  publisher_id: u64,
  metadata: z.looseObject({
    kv_state_endpoint: z.looseObject({ namespace: z.string(), component: z.string(), name: z.string() }),
    worker: z.looseObject({ worker_id: u64, dp_rank: z.number().int().nonnegative() }),
    publisher_id: u64,
    recovery_target: z.unknown().optional(),
  }),
});
export type EventSourceRecord = z.output<typeof EventSourceRecordSchema>;

function scopeJson(scope: EventScope) {
  return { kind: 'endpoint', endpoint: { namespace: scope.namespace, component: scope.component, name: scope.endpoint } } as const;
}

/** The record text of a publisher's channel, fields in stock's order. */
export function eventChannelRecord(scope: EventScope, topic: string, publisherId: bigint, transport: EventTransport): string {
  return stringifyJson({ type: 'EventChannel', scope: scopeJson(scope), topic, instance_id: publisherId, transport });
}

/** The record text of a KV event source: `workerId`'s rank `dpRank`, its state kept at `scope`. */
export function eventSourceRecord(scope: EventScope, topic: string, publisherId: bigint, workerId: bigint, dpRank: number, recoveryTarget?: unknown): string {
  const s = scopeJson(scope);
  return stringifyJson({
    type: 'EventSource',
    scope: s,
    topic,
    publisher_id: publisherId,
    metadata: {
      kv_state_endpoint: s.endpoint,
      worker: { worker_id: workerId, dp_rank: dpRank },
      publisher_id: publisherId,
      ...(recoveryTarget === undefined ? {} : { recovery_target: recoveryTarget }),
    },
  });
}

/** Decodes a channel record; throws naming what is wrong. */
export function decodeEventChannelRecord(text: string): EventChannelRecord {
  const parsed = EventChannelRecordSchema.safeParse(parseJson(text));
  if (!parsed.success) throw new TypeError(`invalid event channel record: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

import { z } from 'zod';
import type { KvCacheEvents } from '@dynamo/llm';
import { parseOrThrow } from '@dynamo/runtime';

/** An engine-owned ZMQ publisher the framework subscribes to for KV cache events. */
export interface ZmqSource {
  kind: 'zmq';
  endpoint: string;
  topic?: string;
  dpRank?: number;
}

/** An engine that pushes KV events itself once the framework hands it a publisher. */
export interface PushSource<Publisher = KvCacheEvents> {
  kind: 'push';
  onReady: (publisher: Publisher) => void;
  dpRank?: number;
}

/** One KV event source per data-parallel rank, returned by `LLMEngine.kvEventSources()`. */
export type KvEventSource = ZmqSource | PushSource;

/** Validates a KV event source list; the error names the offending index and field. */
export const KvEventSourcesSchema = z.array(
  z.discriminatedUnion('kind', [
    z.strictObject({
      kind: z.literal('zmq'),
      endpoint: z.string().min(1),
      topic: z.string().optional(),
      dpRank: z.uint32().optional(),
    }),
    z.strictObject({
      kind: z.literal('push'),
      onReady: z.custom<(publisher: KvCacheEvents) => void>((v) => typeof v === 'function', 'onReady must be a function'),
      dpRank: z.uint32().optional(),
    }),
  ]),
);

/** Renders sources with Dynamo's names (`dp_rank`); callbacks stay on the JS side. */
export function kvEventSourcesToWire(sources: unknown): Array<Record<string, unknown>> {
  return parseOrThrow(KvEventSourcesSchema, sources, 'kvEventSources').map((s) =>
    s.kind === 'zmq' ? { kind: 'zmq', endpoint: s.endpoint, topic: s.topic ?? '', dp_rank: s.dpRank ?? 0 } : { kind: 'push', dp_rank: s.dpRank ?? 0 },
  );
}

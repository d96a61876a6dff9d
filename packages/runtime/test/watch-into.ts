import type { KvEvent, KvStore } from '../src/discovery/kv-store.js';

/** Collects a store's watch events into an array until `stop()`. */
export function watchInto(store: KvStore, bucket: string, prefix: string): { events: KvEvent[]; stop(): Promise<void> } {
  const abort = new AbortController();
  const events: KvEvent[] = [];
  const done = (async () => {
    for await (const event of store.watch(bucket, prefix, abort.signal)) events.push(event);
  })();
  return {
    events,
    stop: async () => {
      abort.abort();
      await done;
    },
  };
}

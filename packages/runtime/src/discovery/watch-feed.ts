import { EventEmitter, on } from 'node:events';
import type { KvEvent } from './kv-store.js';

/**
 * What a watch consumer has seen so far. Backends report "key now holds value" or "key is gone"
 * (from events or full rescans, possibly repeating themselves); the feed turns that into put and
 * delete events, each change exactly once, readable as an async iterable until `stop` aborts.
 */
export class WatchFeed {
  readonly #out = new EventEmitter();
  readonly #known = new Map<string, string>();
  readonly events: AsyncIterableIterator<[KvEvent]>;

  constructor(stop: AbortSignal) {
    this.events = on(this.#out, 'event', { signal: stop }) as AsyncIterableIterator<[KvEvent]>;
  }

  /** Records `key`'s current value (`undefined`: gone), emitting an event if it changed. */
  apply(key: string, value: string | undefined): void {
    if (value === undefined) {
      if (this.#known.delete(key)) this.#out.emit('event', { type: 'delete', key } satisfies KvEvent);
    } else if (this.#known.get(key) !== value) {
      this.#known.set(key, value);
      this.#out.emit('event', { type: 'put', key, value } satisfies KvEvent);
    }
  }

  /** After a full listing: every key not in `present` is gone. */
  retainOnly(present: ReadonlySet<string>): void {
    for (const key of [...this.#known.keys()]) if (!present.has(key)) this.apply(key, undefined);
  }
}

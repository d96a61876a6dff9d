import type { Client, DistributedRuntime, EventScope, Log } from '@dynamo/runtime';
import { EVENT_SOURCES_BUCKET, eventRecordPrefix, EventSourceRecordSchema, parseJson, stringifyJson } from '@dynamo/runtime/internal';
import { z } from 'zod';

/** A worker rank's KV event source, and where to ask for what it missed. */
interface Source {
  workerId: bigint;
  dpRank: number;
  target: { namespace: string; component: string; endpoint: string; instanceId: bigint } | undefined;
}

const TargetSchema = z.looseObject({
  namespace: z.string(),
  component: z.string(),
  endpoint: z.string(),
  instance_id: z.union([z.bigint(), z.number()]).transform(BigInt),
});

/**
 * Keeps a KV router's view of a worker rank whole, as stock routers do: each worker's
 * `v1/event_sources` record names its recovery endpoint (its local indexer), and when a source
 * first appears, or its events skip ids, the router asks that endpoint for a dump of the rank's
 * cache and replaces what it held. A source without one is live-only.
 */
export class KvSourceRecovery {
  readonly #runtime: DistributedRuntime;
  readonly #apply: (workerId: bigint, dpRank: number, reply: string) => number;
  readonly #log: Log;
  readonly #abort = new AbortController();
  readonly #sources = new Map<string, Source>();
  readonly #clients = new Map<string, Promise<Client>>();
  readonly #running = new Set<string>();
  readonly #watches: Array<Promise<void>> = [];

  constructor(runtime: DistributedRuntime, apply: (workerId: bigint, dpRank: number, reply: string) => number, log: Log) {
    this.#runtime = runtime;
    this.#apply = apply;
    this.#log = log;
  }

  /** Follows the event sources of `scope`, recovering each as it appears. */
  follow(scope: EventScope): void {
    this.#watches.push(this.#watch(scope));
  }

  async #watch(scope: EventScope): Promise<void> {
    const store = this.#runtime.discovery.store;
    try {
      for await (const event of store.watch(EVENT_SOURCES_BUCKET, eventRecordPrefix(scope, 'kv-events'), this.#abort.signal)) {
        if (event.type === 'delete') {
          this.#sources.delete(event.key);
          continue;
        }
        const parsed = EventSourceRecordSchema.safeParse(parseJson(event.value));
        if (!parsed.success) {
          this.#log.warn(
            { key: event.key, err: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ') },
            'ignoring malformed KV event source',
          );
          continue;
        }
        const { worker, recovery_target } = parsed.data.metadata;
        const target = TargetSchema.safeParse(recovery_target);
        const source: Source = {
          workerId: worker.worker_id,
          dpRank: worker.dp_rank,
          target: target.success
            ? { namespace: target.data.namespace, component: target.data.component, endpoint: target.data.endpoint, instanceId: target.data.instance_id }
            : undefined,
        };
        this.#sources.set(event.key, source);
        void this.#recover(source, 'new source');
      }
    } catch (err) {
      if (!this.#abort.signal.aborted) this.#log.warn({ err: (err as Error).message }, 'KV event source watch ended; recovery is off');
    }
  }

  /** The rank's events skipped ids: ask its worker for the whole state again. */
  gap(workerId: bigint, dpRank: number): void {
    for (const source of this.#sources.values()) if (source.workerId === workerId && source.dpRank === dpRank) void this.#recover(source, 'missed events');
  }

  async #recover(source: Source, why: string): Promise<void> {
    const id = `${source.workerId}/${source.dpRank}`;
    if (!source.target || this.#running.has(id) || this.#abort.signal.aborted) return;
    this.#running.add(id);
    const { namespace, component, endpoint, instanceId } = source.target;
    const fields = { worker_id: source.workerId.toString(16), dp_rank: source.dpRank, why };
    try {
      const client = await this.#client(namespace, component, endpoint);
      await client.waitForInstances({ timeoutMs: 5_000, signal: this.#abort.signal });
      const request = {
        worker_id: source.workerId,
        dp_rank: source.dpRank,
        start_event_id: null,
        end_event_id: null,
        supports_tree_dump_failed: true,
        kind: 'recovery',
      };
      for await (const reply of client.direct(request, instanceId, { plainItems: true })) {
        const applied = this.#apply(source.workerId, source.dpRank, stringifyJson(reply));
        this.#log.info({ ...fields, events: applied }, 'KV state recovered from the worker');
      }
    } catch (err) {
      if (!this.#abort.signal.aborted)
        this.#log.warn({ ...fields, err: (err as Error).message }, 'KV state recovery failed; routing goes on with what the events said');
    } finally {
      this.#running.delete(id);
    }
  }

  #client(namespace: string, component: string, endpoint: string): Promise<Client> {
    const key = `${namespace}/${component}/${endpoint}`;
    let client = this.#clients.get(key);
    if (!client) {
      client = this.#runtime.namespace(namespace).component(component).endpoint(endpoint).client();
      this.#clients.set(key, client);
    }
    return client;
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await Promise.all(this.#watches);
    for (const client of this.#clients.values()) (await client.catch(() => undefined))?.close();
  }
}

import {
  CannotConnect,
  type Client,
  type Context,
  type DistributedRuntime,
  type EndpointHandler,
  InvalidArgument,
  parseEndpointPath,
  parseOrThrow,
  Unknown,
} from '@dynamo/runtime';
import { hexId, parseHexId } from '@dynamo/runtime/internal';
import { Histogram } from 'prom-client';

import type { LLMEngine } from '../engine.js';
import {
  type KvPullItemSchema,
  KvPullRequestSchema,
  type KvTransfer,
  type KvTransferHandle,
  KvTransferHandleSchema,
  type PulledKvState,
} from '../protocol/kv-transfer.js';

/** The endpoint a prefill worker serves its KV states on, beside its generate endpoint. */
export const KV_TRANSFER_ENDPOINT = 'kv_transfer';

/** Default of `DYN_KV_TRANSFER_MAX_BYTES`: a 4,096-token prompt of a 7B model in f16 is 2 GiB; SmolLM2's 4,096 tokens are 94 MB. */
export const DEFAULT_KV_TRANSFER_MAX_BYTES = 4 * 1024 ** 3;

/** Bytes per item on the wire: small enough to keep both sides' memory flat, large enough to keep items few. */
const ITEM_BYTES = 1024 * 1024;

type PullItem = import('zod').infer<typeof KvPullItemSchema>;

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Bytes and seconds per transfer, on the pulling (decode) side, where a transfer's time is waited for. */
export class KvTransferMetrics {
  readonly #bytes: Histogram;
  readonly #seconds: Histogram;

  constructor(runtime: DistributedRuntime) {
    const registers = [runtime.metrics.registry];
    this.#bytes = new Histogram({
      name: 'dynamo_component_kv_transfer_bytes',
      help: 'Size of each KV state pulled from a prefill worker',
      buckets: [1e5, 1e6, 1e7, 5e7, 1e8, 5e8, 1e9, 4e9],
      registers,
    });
    this.#seconds = new Histogram({
      name: 'dynamo_component_kv_transfer_seconds',
      help: 'Time from asking a prefill worker for a KV state to its last byte',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
  }

  transferred(bytes: number, seconds: number): void {
    this.#bytes.observe(bytes);
    this.#seconds.observe(seconds);
  }
}

/**
 * The prefill side: streams the state a decode worker asks for (`{ id }`) as the engine exports
 * it, a header item first, then the bytes in base64 items of at most 1 MiB. The items leave as the
 * socket takes them, so a slow reader holds the engine's stream back rather than filling memory.
 */
export function kvTransferHandler(engine: LLMEngine, maxBytes: number): EndpointHandler {
  return async function* serveKvState(request: unknown, context: Context): AsyncGenerator<PullItem> {
    const { id } = parseOrThrow(KvPullRequestSchema, request, 'kv_transfer request');
    const state = await engine.exportKvState(id, context);
    let sent = 0;
    try {
      if (state.bytes > maxBytes)
        throw new InvalidArgument(`KV state ${id} is ${state.bytes} bytes, over the ${maxBytes}-byte transfer limit (DYN_KV_TRANSFER_MAX_BYTES)`);
      yield { header: state.header, bytes: state.bytes };
      for await (const chunk of state.chunks) {
        for (let at = 0; at < chunk.length; at += ITEM_BYTES) {
          const part = chunk.subarray(at, at + ITEM_BYTES);
          sent += part.length;
          if (sent > state.bytes) throw new Unknown(`KV state ${id}: the engine exported more than the ${state.bytes} bytes it declared`);
          yield { data: Buffer.from(part.buffer, part.byteOffset, part.length).toString('base64') };
        }
      }
      if (sent !== state.bytes) throw new Unknown(`KV state ${id}: the engine exported ${sent} of the ${state.bytes} bytes it declared`);
    } finally {
      state.done?.(sent === state.bytes);
    }
  };
}

/**
 * The {@link KvTransfer} a worker hands its engine: handles name this worker's transfer endpoint;
 * pulls go straight to the prefill instance a handle names, through the runtime's request plane.
 */
export class RuntimeKvTransfer implements KvTransfer {
  readonly maxBytes: number;
  readonly #runtime: DistributedRuntime;
  readonly #endpoint: string;
  readonly #metrics: KvTransferMetrics;
  readonly #clients = new Map<string, Promise<Client>>();

  constructor(runtime: DistributedRuntime, own: { namespace: string; component: string }, maxBytes: number) {
    this.#runtime = runtime;
    this.#endpoint = `${own.namespace}.${own.component}.${KV_TRANSFER_ENDPOINT}`;
    this.maxBytes = maxBytes;
    this.#metrics = new KvTransferMetrics(runtime);
  }

  handle(id: string, bytes: number): KvTransferHandle {
    return { endpoint: this.#endpoint, instance_id: hexId(this.#runtime.instanceId), id, bytes };
  }

  async pull(handle: unknown, context: Context): Promise<PulledKvState> {
    const began = performance.now();
    const { endpoint, instance_id, id, bytes } = parseOrThrow(KvTransferHandleSchema, handle, 'prefill_result.disaggregated_params.kv_transfer');
    if (bytes > this.maxBytes)
      throw new InvalidArgument(`the prefilled KV state is ${bytes} bytes, over the ${this.maxBytes}-byte transfer limit (DYN_KV_TRANSFER_MAX_BYTES)`);
    const client = await this.#client(endpoint);
    const instance = parseHexId(instance_id);
    let items: AsyncIterator<PullItem>;
    let first: IteratorResult<PullItem>;
    try {
      items = client.direct<PullItem>({ id }, instance, { signal: context.signal })[Symbol.asyncIterator]();
      first = await items.next();
    } catch (err) {
      throw new CannotConnect(`KV state ${id} from prefill worker ${instance_id}: ${message(err)}`, { cause: err });
    }
    const head = first.done ? undefined : first.value;
    if (head === undefined || !('header' in head) || head.bytes !== bytes) {
      await items.return?.();
      throw new Unknown(`KV state ${id} from prefill worker ${instance_id}: the stream did not start with the header of a ${bytes}-byte state`);
    }
    const metrics = this.#metrics;
    async function* chunks(): AsyncGenerator<Uint8Array> {
      let got = 0;
      try {
        for (;;) {
          let next: IteratorResult<PullItem>;
          try {
            next = await items.next();
          } catch (err) {
            throw new CannotConnect(`KV state ${id} from prefill worker ${instance_id} broke off after ${got} of ${bytes} bytes: ${message(err)}`, {
              cause: err,
            });
          }
          if (next.done) break;
          if (!('data' in next.value)) throw new Unknown(`KV state ${id} from prefill worker ${instance_id}: a second header in the stream`);
          const data = Buffer.from(next.value.data, 'base64');
          got += data.length;
          if (got > bytes) throw new Unknown(`KV state ${id} from prefill worker ${instance_id}: more than the ${bytes} bytes declared`);
          yield data;
        }
        if (got !== bytes) throw new CannotConnect(`KV state ${id} from prefill worker ${instance_id} ended after ${got} of ${bytes} bytes`);
        metrics.transferred(bytes, (performance.now() - began) / 1000);
      } finally {
        await items.return?.();
      }
    }
    return { header: head.header, bytes, chunks: chunks() };
  }

  /** A client of the transfer endpoint at `path`, made once per path. */
  #client(path: string): Promise<Client> {
    let client = this.#clients.get(path);
    if (!client) {
      const { namespace, component, endpoint } = parseEndpointPath(path);
      client = this.#runtime.namespace(namespace).component(component).endpoint(endpoint).client();
      this.#clients.set(path, client);
      client.catch(() => this.#clients.delete(path));
    }
    return client;
  }

  /** Stops following discovery for every transfer endpoint. */
  async close(): Promise<void> {
    for (const client of this.#clients.values()) (await client.catch(() => undefined))?.close();
    this.#clients.clear();
  }
}

import type { Context } from '@dynamo/runtime';
import { z } from 'zod';

/**
 * Where a decode worker pulls a prefilled request's KV state from: a prefill engine puts it in
 * its terminal chunk's `disaggregated_params.kv_transfer` (made by {@link KvTransfer.handle}).
 * `instance_id` is the prefill worker's discovery instance id in hex, as stock prints it.
 */
export const KvTransferHandleSchema = z.object({
  endpoint: z.string().regex(/^[^.]+\.[^.]+\.[^.]+$/, 'expected namespace.component.endpoint'),
  instance_id: z.string().regex(/^[0-9a-f]{1,16}$/, 'expected a hex instance id'),
  id: z.string().min(1),
  bytes: z.number().int().nonnegative(),
});

/** See {@link KvTransferHandleSchema}. */
export type KvTransferHandle = z.infer<typeof KvTransferHandleSchema>;

/**
 * What a prefill engine describes a state with, checked by the decode engine before it loads any
 * of it (model, cache layout, sizes): engine-defined JSON.
 */
export type KvStateHeader = Record<string, unknown>;

/** A KV state as the prefill engine hands it out: its header, then its bytes in order. */
export interface ExportedKvState {
  header: KvStateHeader;
  /** The state's size; the stream must deliver exactly this many bytes. */
  bytes: number;
  chunks: AsyncIterable<Uint8Array>;
  /** Called once the state was sent whole (`true`) or the transfer failed (`false`). */
  done?(sent: boolean): void;
}

/** A KV state being pulled: the header arrived; the bytes follow, checked against `bytes`. */
export interface PulledKvState {
  header: KvStateHeader;
  bytes: number;
  chunks: AsyncIterable<Uint8Array>;
}

/**
 * The KV transfer between prefill and decode workers, through the runtime: the worker hands it to
 * an engine serving either role ({@link LLMEngine.attachKvTransfer}).
 */
export interface KvTransfer {
  /** Largest state a transfer carries (`DYN_KV_TRANSFER_MAX_BYTES`); larger ones are refused on both sides. */
  readonly maxBytes: number;
  /** On a prefill worker: the handle of exported state `id` of `bytes` bytes, for `disaggregated_params.kv_transfer`. */
  handle(id: string, bytes: number): KvTransferHandle;
  /**
   * On a decode worker: pulls the state `handle` (the `disaggregated_params.kv_transfer` a
   * prefill worker returned) names. Rejects when the handle is malformed, the prefill worker is
   * gone or refuses, or the state is over {@link maxBytes}; the chunks throw if the stream breaks
   * or delivers other than `bytes` bytes.
   */
  pull(handle: unknown, context: Context): Promise<PulledKvState>;
}

/** The request a decode worker sends to a prefill worker's transfer endpoint. */
export const KvPullRequestSchema = z.object({ id: z.string().min(1) });

/**
 * An item of the transfer stream: first `{ header, bytes }`, then `{ data }` items (base64) in
 * order; the stream ends after the last byte.
 */
export const KvPullItemSchema = z.union([
  z.object({ header: z.record(z.string(), z.unknown()), bytes: z.number().int().nonnegative() }),
  z.object({ data: z.string() }),
]);

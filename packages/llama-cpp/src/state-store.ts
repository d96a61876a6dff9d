import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { access, mkdtemp, rm, stat, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

import { engineLog, type ExportedKvState, InvalidArgument, type PulledKvState } from '@dynamo/backend';
import type { LlamaContextSequence } from 'node-llama-cpp';

import type { StateLayout } from './state-header.js';

const log = engineLog('llama-cpp');

/** A staged state, waiting for its decode worker. */
interface Staged {
  path: string;
  bytes: number;
  header: StateLayout;
  expiry: NodeJS.Timeout;
}

/**
 * Sequence states between llama.cpp and the network, as files: llama.cpp saves and loads a
 * sequence's state only to and from a file. They live in `/dev/shm` where it exists (memory, no
 * disk I/O), else in the temporary folder, in a folder of this process's own removed at close.
 *
 * On a prefill worker a prompt's state is staged once evaluated, so its sequence is free for the
 * next request at once; the state waits for one pull, and is removed after it or after
 * `timeoutMs`. On a decode worker a pulled state is written here, loaded, and removed.
 */
export class StateStore {
  readonly #dir: string;
  readonly #timeoutMs: number;
  readonly #staged = new Map<string, Staged>();
  /** States being sent. */
  #sending = 0;
  #emptied: (() => void) | undefined;

  private constructor(dir: string, timeoutMs: number) {
    this.#dir = dir;
    this.#timeoutMs = timeoutMs;
  }

  static async open(timeoutMs: number): Promise<StateStore> {
    const shm = await access('/dev/shm').then(
      () => '/dev/shm',
      () => tmpdir(),
    );
    return new StateStore(await mkdtemp(join(shm, 'dynamo-llama-cpp-kv-')), timeoutMs);
  }

  /** States waiting for a decode worker or being sent to one. */
  get pending(): number {
    return this.#staged.size + this.#sending;
  }

  /**
   * Saves `sequence`'s state for one pull; returns its id and size. Refuses (removing it) a state
   * over `maxBytes`.
   */
  async stage(sequence: LlamaContextSequence, header: StateLayout, maxBytes: number): Promise<{ id: string; bytes: number }> {
    const id = randomUUID().replaceAll('-', '');
    const path = join(this.#dir, id);
    const { fileSize: bytes } = await sequence.saveStateToFile(path);
    if (bytes > maxBytes) {
      await unlink(path).catch(() => {});
      throw new InvalidArgument(
        `the prompt's KV state is ${bytes} bytes, over the ${maxBytes}-byte transfer limit (DYN_KV_TRANSFER_MAX_BYTES): shorten the prompt or raise the limit`,
      );
    }
    const expiry = setTimeout(() => {
      log.warn({ id, bytes, timeout_ms: this.#timeoutMs }, 'KV state not pulled by a decode worker in time; removed');
      void this.#remove(id);
    }, this.#timeoutMs).unref();
    this.#staged.set(id, { path, bytes, header, expiry });
    return { id, bytes };
  }

  /** State `id` for its pull (once): removed when the transfer ends, whether it went through or not. */
  export(id: string): ExportedKvState {
    const staged = this.#staged.get(id);
    if (!staged)
      throw new InvalidArgument(`KV state ${id} is not on this prefill worker: never staged, already pulled, or removed after ${this.#timeoutMs / 1000} s`);
    clearTimeout(staged.expiry);
    // Taken now, so that a second pull of the same id is refused rather than racing the first.
    this.#staged.delete(id);
    this.#sending++;
    return {
      header: { ...staged.header },
      bytes: staged.bytes,
      chunks: createReadStream(staged.path, { highWaterMark: 1024 * 1024 }),
      done: () => {
        this.#sending--;
        void unlink(staged.path).catch(() => {});
        this.#checkEmpty();
      },
    };
  }

  /** Resolves once no state waits for a pull or is being sent (a prefill worker's drain). */
  async whenEmpty(): Promise<void> {
    if (this.pending === 0) return;
    await new Promise<void>((resolve) => (this.#emptied = resolve));
  }

  /** Writes a pulled state to a file of its own and returns its path; the caller removes it with {@link discard}. */
  async receive(state: PulledKvState): Promise<string> {
    const path = join(this.#dir, `pulled-${randomUUID()}`);
    try {
      await pipeline(state.chunks, createWriteStream(path));
      const { size } = await stat(path);
      if (size !== state.bytes) throw new InvalidArgument(`pulled KV state: ${size} bytes written of the ${state.bytes} declared`);
      return path;
    } catch (err) {
      await unlink(path).catch(() => {});
      throw err;
    }
  }

  /** Removes a file {@link receive} wrote. */
  async discard(path: string): Promise<void> {
    await unlink(path).catch(() => {});
  }

  /** Removes every state and the folder. */
  async close(): Promise<void> {
    for (const staged of this.#staged.values()) clearTimeout(staged.expiry);
    this.#staged.clear();
    this.#checkEmpty();
    await rm(this.#dir, { recursive: true, force: true });
  }

  async #remove(id: string): Promise<void> {
    const staged = this.#staged.get(id);
    if (!staged) return;
    this.#staged.delete(id);
    await unlink(staged.path).catch(() => {});
    this.#checkEmpty();
  }

  #checkEmpty(): void {
    if (this.pending > 0) return;
    const emptied = this.#emptied;
    this.#emptied = undefined;
    emptied?.();
  }
}

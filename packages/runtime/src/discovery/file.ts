/**
 * The `file` discovery backend, in stock Dynamo's on-disk layout so TypeScript and Rust/Python
 * processes on one host (or one shared filesystem) discover each other without etcd:
 *
 * - root `DYN_FILE_KV` (default `$TMPDIR/dynamo_store_kv`); each bucket is a sub-directory path
 *   (`v1/instances` → `{root}/v1/instances/`);
 * - one file per key, named by the key with every byte other than an ASCII letter or digit written
 *   as `%XX` (`dynamo/backend/generate/1f` → `dynamo%2Fbackend%2Fgenerate%2F1f`); the content is
 *   the value (JSON text), byte for byte;
 * - writes go to `.tmp_{16 hex}` in the same directory and are then hard-linked (create) or renamed
 *   (put) into place, so readers never see a half-written file;
 * - liveness is the file's mtime: the owner touches its files every max(TTL/3, 1 s); anyone who
 *   finds a file older than the TTL treats it as a crashed process's leftover and deletes it.
 */

import { randomBytes } from 'node:crypto';
import { type FSWatcher, watch as fsWatch } from 'node:fs';
import { link, mkdir, readdir, readFile, rename, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Disconnected, InvalidArgument } from '../errors.js';
import { createLogging, type Log } from '../logger.js';
import { KeyExistsError, type KvEntry, type KvEvent, type KvStore } from './kv-store.js';
import { WatchFeed } from './watch-feed.js';
import { randomInstanceId } from './mem.js';

/** Options for {@link FileKvStore}; `root` and `ttlSecs` are `DYN_FILE_KV` and `DYN_FILE_KV_TTL_SECS`. */
export interface FileKvStoreOptions {
  /** Root directory of the store (default `$TMPDIR/dynamo_store_kv`, as Dynamo's). */
  root?: string;
  /** Seconds a file stays live without its owner touching it (default 10). */
  ttlSecs?: number;
  /** Fixes the instance id (default: a random u64, as Dynamo draws per process). */
  instanceId?: bigint;
  /** How often a watch rescans its directory besides reacting to fs events (default 1000 ms). */
  rescanIntervalMs?: number;
  /** Where warnings go (default: a `runtime.discovery.file` logger on stderr). */
  log?: Log;
}

const TEMP_PREFIX = '.tmp_';
const encodedName = /^(?:[A-Za-z0-9]|%[0-9A-Fa-f]{2})+$/;

/** The file name Dynamo gives `key`: every byte except ASCII letters and digits as uppercase `%XX`. */
export function fileNameOfKey(key: string): string {
  let name = '';
  for (const byte of Buffer.from(key, 'utf8')) {
    const isAlnum = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a);
    name += isAlnum ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return name;
}

/** Reads a {@link fileNameOfKey} name back; `undefined` for anything else (temp files, strays). */
export function keyOfFileName(name: string): string | undefined {
  if (!encodedName.test(name)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < name.length; ) {
    if (name[i] === '%') {
      bytes.push(Number.parseInt(name.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(name.charCodeAt(i));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

interface Owned {
  bucket: string;
  key: string;
  value: string;
}

function errorCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (err) {
    if (errorCode(err) !== 'ENOENT') throw err;
  }
}

/**
 * The `file` {@link KvStore}. Construct one per process; it keeps its own files alive until
 * {@link FileKvStore.close}, which deletes them.
 */
export class FileKvStore implements KvStore {
  readonly kind = 'file';
  readonly instanceId: bigint;
  /** The root directory. */
  readonly root: string;
  readonly #ttlMs: number;
  readonly #rescanMs: number;
  readonly #log: Log;
  /** This store's files (absolute path → what it wrote), touched to stay live. */
  readonly #owned = new Map<string, Owned>();
  readonly #closing = new AbortController();
  readonly #touchTimer: NodeJS.Timeout;
  #touching: Promise<void> | undefined;

  constructor(options: FileKvStoreOptions = {}) {
    const ttlSecs = options.ttlSecs ?? 10;
    if (!(ttlSecs > 0) || !Number.isFinite(ttlSecs)) throw new InvalidArgument(`file discovery: ttlSecs must be > 0, got ${ttlSecs}`);
    this.root = options.root ?? join(tmpdir(), 'dynamo_store_kv');
    this.instanceId = options.instanceId ?? randomInstanceId();
    this.#ttlMs = ttlSecs * 1000;
    this.#rescanMs = options.rescanIntervalMs ?? 1000;
    this.#log = options.log ?? createLogging().child('runtime.discovery.file');
    // Dynamo's cadence: three touches per TTL, but no more than one a second.
    this.#touchTimer = setInterval(() => void this.#touchAll(), Math.max(this.#ttlMs / 3, 1000));
    this.#touchTimer.unref();
  }

  async create(bucket: string, key: string, value: string): Promise<void> {
    this.#assertOpen();
    const dir = this.#bucketDir(bucket);
    const file = join(dir, fileNameOfKey(key));
    const temp = await this.#writeTemp(dir, value);
    try {
      // link() refuses to replace an existing name: create-if-absent in one atomic step.
      if (!(await this.#tryLink(temp, file))) {
        if (!(await this.#isExpired(file))) throw new KeyExistsError(bucket, key);
        // A crashed process's leftover does not count as the key existing.
        await unlinkIfPresent(file);
        if (!(await this.#tryLink(temp, file))) throw new KeyExistsError(bucket, key);
      }
    } finally {
      await unlinkIfPresent(temp);
    }
    this.#owned.set(file, { bucket, key, value });
  }

  async put(bucket: string, key: string, value: string): Promise<void> {
    this.#assertOpen();
    const dir = this.#bucketDir(bucket);
    const file = join(dir, fileNameOfKey(key));
    await this.#replace(dir, file, value);
    this.#owned.set(file, { bucket, key, value });
  }

  async delete(bucket: string, key: string): Promise<void> {
    this.#assertOpen();
    const file = join(this.#bucketDir(bucket), fileNameOfKey(key));
    this.#owned.delete(file);
    await unlinkIfPresent(file);
  }

  async list(bucket: string, prefix = ''): Promise<KvEntry[]> {
    this.#assertOpen();
    const dir = this.#bucketDir(bucket);
    const entries: KvEntry[] = [];
    for (const { name, key } of await this.#keysIn(dir)) {
      if (!key.startsWith(prefix)) continue;
      const value = await this.#readLive(join(dir, name));
      if (value !== undefined) entries.push({ key, value });
    }
    return entries;
  }

  async *watch(bucket: string, prefix: string, signal: AbortSignal): AsyncGenerator<KvEvent> {
    this.#assertOpen();
    const stop = AbortSignal.any([signal, this.#closing.signal]);
    if (stop.aborted) return;
    const dir = this.#bucketDir(bucket);
    await mkdir(dir, { recursive: true });

    const feed = new WatchFeed(stop);
    const apply = (key: string, value: string | undefined) => feed.apply(key, value);

    // One file at a time, one job at a time: overlapping reads of the same key could otherwise
    // report an older value after a newer one.
    let queue = Promise.resolve();
    const enqueue = (job: () => Promise<void>) => {
      queue = queue.then(job).catch((err: unknown) => this.#log.warn({ dir, err: String(err) }, 'file discovery watch: scan failed'));
    };
    const checkOne = async (name: string) => {
      const key = keyOfFileName(name);
      if (key === undefined || !key.startsWith(prefix)) return;
      apply(key, await this.#readLive(join(dir, name)));
    };
    let scanPending = false;
    const scan = async () => {
      scanPending = false;
      const seen = new Set<string>();
      for (const { name, key } of await this.#keysIn(dir, true)) {
        if (!key.startsWith(prefix)) continue;
        seen.add(key);
        apply(key, await this.#readLive(join(dir, name)));
      }
      feed.retainOnly(seen);
    };
    const requestScan = () => {
      if (scanPending) return;
      scanPending = true;
      enqueue(scan);
    };

    let watcher: FSWatcher | undefined;
    const startWatcher = () => {
      try {
        // Not persistent: a watch must never be the thing keeping the process alive.
        watcher = fsWatch(dir, { persistent: false }, (_type, name) => {
          if (name) enqueue(() => checkOne(name.toString()));
          else requestScan();
        });
        watcher.on('error', (err) => {
          this.#log.debug({ dir, err: String(err) }, 'file discovery watch: fs.watch failed; relying on rescans');
          watcher?.close();
          watcher = undefined;
        });
      } catch (err) {
        this.#log.debug({ dir, err: String(err) }, 'file discovery watch: cannot fs.watch; relying on rescans');
      }
    };

    // fs.watch misses events on some filesystems and never reports expiry, so a periodic rescan
    // backs it up; it also re-arms fs.watch if the directory was removed and came back.
    const rescan = setInterval(() => {
      if (watcher === undefined) {
        enqueue(async () => {
          await mkdir(dir, { recursive: true });
          if (watcher === undefined && !stop.aborted) startWatcher();
        });
      }
      requestScan();
    }, this.#rescanMs);
    rescan.unref();

    startWatcher();
    requestScan(); // the snapshot: queued before any fs event, so it is delivered first
    try {
      for await (const [event] of feed.events) yield event;
    } catch (err) {
      if (!stop.aborted) throw err;
    } finally {
      clearInterval(rescan);
      watcher?.close();
    }
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return;
    this.#closing.abort();
    clearInterval(this.#touchTimer);
    // A touch pass in flight could otherwise re-create a file right after we delete it.
    await this.#touching;
    const files = [...this.#owned.keys()];
    this.#owned.clear();
    await Promise.all(
      files.map((file) =>
        unlinkIfPresent(file).catch((err: unknown) => this.#log.warn({ file, err: String(err) }, 'file discovery: could not remove own file on close')),
      ),
    );
  }

  /** Refreshes the mtime of every file this store owns; re-creates any that someone removed. */
  #touchAll(): Promise<void> {
    if (this.#touching) return this.#touching;
    this.#touching = (async () => {
      for (const [file, owned] of [...this.#owned]) {
        if (this.#closing.signal.aborted) return;
        const now = new Date();
        try {
          await utimes(file, now, now);
        } catch (err) {
          if (errorCode(err) !== 'ENOENT') {
            this.#log.warn({ file, err: String(err) }, 'file discovery: touch failed');
            continue;
          }
          // Still ours and still current? Then another process swept it as expired (we were
          // stalled past the TTL): put it back, as the etcd backend re-puts keys after lease loss.
          if (this.#owned.get(file) !== owned || this.#closing.signal.aborted) continue;
          try {
            await this.#replace(this.#bucketDir(owned.bucket), file, owned.value);
            this.#log.warn({ bucket: owned.bucket, key: owned.key }, 'file discovery: own record had been removed as expired; re-created it');
          } catch (rewriteErr) {
            this.#log.warn({ file, err: String(rewriteErr) }, 'file discovery: could not re-create own record');
          }
        }
      }
    })().finally(() => {
      this.#touching = undefined;
    });
    return this.#touching;
  }

  #bucketDir(bucket: string): string {
    const segments = bucket.split('/');
    if (segments.some((s) => s === '' || s === '.' || s === '..')) {
      throw new InvalidArgument(`file discovery: bucket must be a relative path of named segments, got '${bucket}'`);
    }
    return join(this.root, ...segments);
  }

  async #writeTemp(dir: string, value: string): Promise<string> {
    await mkdir(dir, { recursive: true });
    const temp = join(dir, `${TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    await writeFile(temp, value, { flag: 'wx' });
    return temp;
  }

  /** Atomically writes `file` with `value`, replacing what was there. */
  async #replace(dir: string, file: string, value: string): Promise<void> {
    const temp = await this.#writeTemp(dir, value);
    try {
      await rename(temp, file);
    } catch (err) {
      await unlinkIfPresent(temp);
      throw err;
    }
  }

  async #tryLink(temp: string, file: string): Promise<boolean> {
    try {
      await link(temp, file);
      return true;
    } catch (err) {
      if (errorCode(err) === 'EEXIST') return false;
      throw err;
    }
  }

  async #isExpired(file: string): Promise<boolean> {
    if (this.#owned.has(file)) return false;
    try {
      return Date.now() - (await stat(file)).mtimeMs > this.#ttlMs;
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return true;
      throw err;
    }
  }

  /** Regular files of `dir` that name a key; with `sweepTemps`, also removes expired temp files. */
  async #keysIn(dir: string, sweepTemps = false): Promise<Array<{ name: string; key: string }>> {
    let dirents;
    try {
      dirents = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return [];
      throw err;
    }
    const keys: Array<{ name: string; key: string }> = [];
    for (const d of dirents) {
      if (!d.isFile()) continue; // sub-directories are other buckets
      if (d.name.startsWith(TEMP_PREFIX)) {
        // A writer that crashed between writing and linking leaves its temp file behind.
        if (sweepTemps && (await this.#isExpired(join(dir, d.name)))) await unlinkIfPresent(join(dir, d.name)).catch(() => undefined);
        continue;
      }
      const key = keyOfFileName(d.name);
      if (key !== undefined) keys.push({ name: d.name, key });
    }
    return keys;
  }

  /** The content of a live file; `undefined` if it is gone or expired (and then it is removed). */
  async #readLive(file: string): Promise<string | undefined> {
    try {
      const info = await stat(file);
      if (!info.isFile()) return undefined;
      if (!this.#owned.has(file) && Date.now() - info.mtimeMs > this.#ttlMs) {
        await unlinkIfPresent(file);
        this.#log.debug({ file }, 'file discovery: removed expired record');
        return undefined;
      }
      return await readFile(file, 'utf8');
    } catch (err) {
      if (errorCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  #assertOpen(): void {
    if (this.#closing.signal.aborted) throw new Disconnected('file discovery store is closed');
  }
}

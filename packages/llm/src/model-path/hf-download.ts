import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cancelled, Disconnected, Unknown, type DynamoException } from '@dynamo/runtime';
import type { HfRepoCache } from './hf-cache.js';
import { isTransient, markTransient, type FileMetadata, type HubClient } from './hf-http.js';
import { withFileLock } from './lock.js';
import type { Log } from '@dynamo/runtime';
import type { FileProgress, Progress } from './progress.js';

/** Everything downloading the files of one repo commit needs. */
export interface DownloadContext {
  client: HubClient;
  cache: HfRepoCache;
  repoId: string;
  commit: string;
  progress: Progress;
  log: Log;
  signal?: AbortSignal;
  /** A transfer that stalls this long (no bytes) is dropped and resumed. */
  stallTimeoutMs: number;
  /** Tries per file, resuming each time from what is on disk. */
  attempts: number;
  /** First retry delay; doubles per attempt, at most 8 s. */
  backoffMs: number;
}

/** The finished blob is wrong (too long, or its sha256 differs from the ETag): start it again. */
class CorruptDownload extends Error {}

/**
 * Makes `snapshots/{commit}/{file}` exist: asks the Hub for the file's ETag, downloads the blob
 * unless the cache already holds it (under a lock shared by processes), and links it.
 */
export async function fetchFile(ctx: DownloadContext, file: string): Promise<void> {
  const meta = await ctx.client.fileMetadata(ctx.repoId, ctx.commit, file);
  if (!(await ctx.cache.hasBlob(meta.etag, meta.size))) {
    await withFileLock(
      ctx.cache.lockPath(meta.etag),
      async () => {
        // Whoever held the lock before us may have finished this blob.
        if (!(await ctx.cache.hasBlob(meta.etag, meta.size))) await downloadBlob(ctx, file, meta);
      },
      { signal: ctx.signal, onWait: () => ctx.log.info({ repo: ctx.repoId, file }, `waiting for another download of ${ctx.repoId}/${file}`) },
    );
  }
  await ctx.cache.linkFile(ctx.commit, file, meta.etag);
}

async function sizeOf(path: string): Promise<number> {
  return stat(path).then(
    (s) => s.size,
    () => 0,
  );
}

async function downloadBlob(ctx: DownloadContext, file: string, first: FileMetadata): Promise<void> {
  let meta = first;
  const blob = ctx.cache.blobPath(meta.etag);
  const partial = `${blob}.incomplete`;
  await mkdir(dirname(blob), { recursive: true });
  const progress = ctx.progress.file(file);
  let total = meta.size;
  for (let attempt = 1; ; attempt++) {
    let have = await sizeOf(partial);
    try {
      if (total !== undefined && have > total) {
        await rm(partial, { force: true });
        have = 0;
      }
      // A retry asks the Hub again: redirect targets are signed URLs that expire.
      if (attempt > 1) meta = { ...(await ctx.client.fileMetadata(ctx.repoId, ctx.commit, file)), etag: meta.etag };
      if (total === undefined || have < total) total = await transfer(ctx, file, meta, partial, have, progress);
      await verify(partial, meta.etag, total);
      await rename(partial, blob);
      progress.done();
      return;
    } catch (err) {
      if (ctx.signal?.aborted) throw new Cancelled(`download of ${ctx.repoId}/${file} cancelled`, { cause: err });
      const corrupt = err instanceof CorruptDownload;
      if (corrupt) await rm(partial, { force: true });
      else if (!isTransient(err)) throw err;
      const reason = (err as Error).message;
      if (attempt >= ctx.attempts) throw giveUp(ctx, file, meta, partial, attempt, err, corrupt);
      const delay = Math.min(ctx.backoffMs * 2 ** (attempt - 1), 8_000);
      ctx.log.warn(
        { repo: ctx.repoId, file, attempt, bytes: await sizeOf(partial), error: reason },
        `download of ${ctx.repoId}/${file} interrupted (${reason}); resuming in ${delay} ms`,
      );
      await sleep(delay, undefined, { signal: ctx.signal }).catch((e: unknown) => {
        throw new Cancelled(`download of ${ctx.repoId}/${file} cancelled`, { cause: e });
      });
    }
  }
}

function giveUp(ctx: DownloadContext, file: string, meta: FileMetadata, partial: string, attempts: number, err: unknown, corrupt: boolean): DynamoException {
  const what = `download of ${ctx.repoId}/${file} from ${meta.url} failed after ${attempts} attempts: ${(err as Error).message}`;
  if (corrupt) return new Unknown(what, { cause: err });
  return new Disconnected(`${what}; the bytes fetched so far are kept in ${partial} and the next attempt resumes from there`, { cause: err });
}

/**
 * One GET from byte `have` on, appended to `partial`. Returns the file's full size when the
 * answer tells it. A connection lost or stalled while reading is transient (resumable).
 */
async function transfer(
  ctx: DownloadContext,
  file: string,
  meta: FileMetadata,
  partial: string,
  have: number,
  progress: FileProgress,
): Promise<number | undefined> {
  const stall = new AbortController();
  const signal = ctx.signal ? AbortSignal.any([ctx.signal, stall.signal]) : stall.signal;
  const stallSecs = ctx.stallTimeoutMs / 1000;
  const timer = setTimeout(() => stall.abort(new DOMException(`no data for ${stallSecs} s (HF_HUB_DOWNLOAD_TIMEOUT)`, 'TimeoutError')), ctx.stallTimeoutMs);
  try {
    const res = await ctx.client.download(meta.url, have, { repoId: ctx.repoId, file }, signal);
    const range = /^bytes (?:(\d+)-\d+|\*)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
    if (res.status === 416) {
      // Asked for bytes past the end: what we have is complete, or belongs to a longer file.
      await res.body?.cancel().catch(() => undefined);
      const size = range ? Number(range[2]) : undefined;
      if (size === have) return size;
      await rm(partial, { force: true });
      throw markTransient(new Error(`${partial} does not fit ${meta.url} (416); starting over`));
    }
    let offset = 0;
    let size = optionalNumber(res.headers.get('content-length'));
    if (res.status === 206) {
      offset = Number(range?.[1] ?? NaN);
      size = optionalNumber(range?.[2] ?? null);
      if (offset !== have) {
        await res.body?.cancel().catch(() => undefined);
        throw new Unknown(`asked ${meta.url} for bytes from ${have}, got Content-Range '${res.headers.get('content-range')}'`);
      }
    }
    size ??= meta.size;
    progress.start(offset, size);
    const out = await open(partial, offset === 0 ? 'w' : 'a');
    let writing = false;
    try {
      for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
        writing = true;
        await out.write(chunk);
        writing = false;
        progress.advance(chunk.byteLength);
        timer.refresh();
      }
    } catch (err) {
      // A write error (disk full) is final; a read error is a dropped connection or a stall.
      if (writing || ctx.signal?.aborted) throw err;
      const reason = err instanceof Error ? `${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}` : String(err);
      throw markTransient(new Disconnected(`connection to ${meta.url} lost while reading ${file}: ${reason}`, { cause: err }));
    } finally {
      await out.close();
    }
    return size;
  } finally {
    clearTimeout(timer);
  }
}

function optionalNumber(value: string | null): number | undefined {
  const n = value === null ? NaN : Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Checks the finished file's size and, for an LFS file (sha256 ETag), its sha256. */
async function verify(partial: string, etag: string, total: number | undefined): Promise<void> {
  const size = await sizeOf(partial);
  if (total !== undefined && size < total) {
    throw markTransient(new Error(`got ${size} of ${total} bytes`));
  }
  if (total !== undefined && size > total) throw new CorruptDownload(`got ${size} bytes, expected ${total}`);
  if (!/^[0-9a-f]{64}$/.test(etag)) return;
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(partial)) hash.update(chunk as Buffer);
  const digest = hash.digest('hex');
  if (digest !== etag) throw new CorruptDownload(`sha256 of the download is ${digest}, expected ${etag}`);
}

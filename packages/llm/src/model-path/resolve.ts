import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Cancelled, DynamoException, InvalidArgument } from '@dynamo/runtime';
import { selectFiles } from './files.js';
import { HfRepoCache } from './hf-cache.js';
import { fetchFile, type DownloadContext } from './hf-download.js';
import { loadHfEnv, type HfEnv } from './hf-env.js';
import { HubClient } from './hf-http.js';
import { resolveLocalPath } from './local.js';
import { defaultLog, silentLog, type ModelPathLog } from './log.js';
import { createProgress } from './progress.js';
import { parseRepoRef } from './repo-id.js';
import type { ResolvedModelPath, ResolveOptions } from './types.js';

/** Files downloaded at once. */
const PARALLEL_FILES = 4;
const FILE_ATTEMPTS = 5;
const RETRY_BACKOFF_MS = 250;

/** Downloads under way in this process, so concurrent resolves of one repo share the work. */
const inflight = new Map<string, Promise<ResolvedModelPath>>();

/**
 * Turns what a user passes as `modelPath` to `registerLlm` into files on local disk, the way
 * stock Dynamo does:
 *
 * - an existing directory → `{ kind: 'dir' }`; an existing `.gguf` file → `{ kind: 'gguf' }`;
 *   any other existing file → `InvalidArgument`;
 * - `Org/Name`, `hf://Org/Name` (either with `@revision`) → the snapshot directory of that revision
 *   in the Hugging Face cache (`$HF_HUB_CACHE`, default `~/.cache/huggingface/hub`), downloaded
 *   first unless already cached, in `huggingface_hub`'s exact layout so Python tools share it.
 *   Only the files a model card needs unless `ignoreWeights: false`. Interrupted downloads resume
 *   (`Range`) within the call and on a later one; finished files are checked against their size
 *   and, for LFS files, their sha256.
 *
 * Errors: `InvalidArgument` for a path that is neither a local file/dir nor a repo id, an unknown
 * repo or revision (404), missing or refused credentials (401/403, see `HF_TOKEN`), and a model
 * missing from the cache under `HF_HUB_OFFLINE=1`; `CannotConnect` when the Hub cannot be reached;
 * `Disconnected` when a download keeps failing; `Cancelled` when `signal` aborts.
 */
export async function resolveModelPath(modelPath: string, options: ResolveOptions = {}): Promise<ResolvedModelPath> {
  if (typeof modelPath !== 'string' || modelPath.trim() === '') {
    throw new InvalidArgument(`model path must be a local directory, a .gguf file or a Hugging Face repo id, got ${JSON.stringify(modelPath)}`);
  }
  const hf = loadHfEnv(options.env ?? process.env);
  const ref = parseRepoRef(modelPath);
  if (!ref?.explicit) {
    const local = await resolveLocalPath(modelPath);
    if (local) return local;
  }
  if (!ref) {
    throw new InvalidArgument(
      `model path '${modelPath}' is neither an existing file or directory (${resolve(modelPath)}) nor a Hugging Face repo id (Org/Name or hf://Org/Name)`,
    );
  }
  if (ref.revision !== undefined && options.revision !== undefined && ref.revision !== options.revision) {
    throw new InvalidArgument(`model path '${modelPath}' names revision '${ref.revision}' but options.revision is '${options.revision}'`);
  }
  const revision = ref.revision ?? options.revision ?? 'main';
  if (!/^[\w.\-/]+$/.test(revision) || revision.split('/').some((p) => p === '' || p === '.' || p === '..')) {
    throw new InvalidArgument(`revision '${revision}' of model '${ref.repoId}' is not a branch, tag or commit hash`);
  }
  return resolveFromHub(ref.repoId, revision, hf, options);
}

async function resolveFromHub(repoId: string, revision: string, hf: HfEnv, options: ResolveOptions): Promise<ResolvedModelPath> {
  const ignoreWeights = options.ignoreWeights ?? true;
  const mode = options.progress ?? 'auto';
  const log = quietFor(mode, options.log);
  const cache = new HfRepoCache(hf.hubCache, repoId);
  const hit = await cache.findSnapshot(revision, ignoreWeights);
  if (hit) {
    log.debug({ repo: repoId, revision, commit: hit.commit, path: hit.dir }, `model ${repoId} found in the Hugging Face cache`);
    return { kind: 'dir', path: hit.dir, repoId, revision: hit.commit, defaultName: repoId };
  }
  if (hf.offline) {
    throw new InvalidArgument(
      `model '${repoId}' (revision '${revision}'${ignoreWeights ? '' : ', with weights'}) is not in the Hugging Face cache at ${cache.root}, ` +
        'and HF_HUB_OFFLINE is set so it cannot be downloaded: download it first or unset HF_HUB_OFFLINE',
    );
  }
  const key = JSON.stringify([hf.hubCache, hf.endpoint, repoId, revision, ignoreWeights]);
  let pending = inflight.get(key);
  if (pending === undefined) {
    pending = download(repoId, revision, ignoreWeights, cache, hf, options, log)
      .catch((err: unknown) => {
        // An abort surfacing as a plain AbortError (from a timer or a lock wait) is still a cancellation.
        if (options.signal?.aborted && !(err instanceof DynamoException)) throw new Cancelled(`resolving model '${repoId}' cancelled`, { cause: err });
        throw err;
      })
      .finally(() => inflight.delete(key));
    inflight.set(key, pending);
    return pending;
  }
  log.debug({ repo: repoId, revision }, `joining a download of ${repoId} already under way`);
  return options.signal ? abortable(pending, options.signal, repoId) : pending;
}

async function download(
  repoId: string,
  revision: string,
  ignoreWeights: boolean,
  cache: HfRepoCache,
  hf: HfEnv,
  options: ResolveOptions,
  log: ModelPathLog,
): Promise<ResolvedModelPath> {
  const token = hf.token ?? (await readFile(hf.tokenPath, 'utf8').then((t) => t.trim() || undefined, () => undefined));
  // Aborted by the caller, or by the first failed file so the others stop too.
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  const client = new HubClient({
    endpoint: hf.endpoint,
    token,
    fetch: options.fetch ?? globalThis.fetch,
    metadataTimeoutMs: hf.metadataTimeoutMs,
    signal,
    log,
  });
  const listing = await client.listFiles(repoId, revision);
  const files = selectFiles(listing.files, ignoreWeights);
  if (!files.includes('config.json')) {
    throw new InvalidArgument(
      `model '${repoId}' (revision '${revision}') on ${hf.endpoint} has no config.json: for a GGUF-only repo, download the .gguf file and pass its path`,
    );
  }
  log.info(
    { repo: repoId, revision, commit: listing.sha, files: files.length, cache: cache.root },
    `downloading ${files.length} files of ${repoId}@${revision} into the Hugging Face cache`,
  );
  const progress = createProgress(options.progress ?? 'auto', repoId, log, { disableBars: hf.disableProgressBars });
  const ctx: DownloadContext = {
    client,
    cache,
    repoId,
    commit: listing.sha,
    progress,
    log,
    signal,
    stallTimeoutMs: hf.downloadTimeoutMs,
    attempts: FILE_ATTEMPTS,
    backoffMs: RETRY_BACKOFF_MS,
  };
  try {
    await forEachLimit(
      files.filter((f) => f !== 'config.json'),
      PARALLEL_FILES,
      (file) => fetchFile(ctx, file),
      stop,
    );
    // Last, so a snapshot with config.json is a complete one (see HfRepoCache.findSnapshot).
    await fetchFile(ctx, 'config.json');
  } finally {
    progress.stop();
  }
  await cache.writeRef(revision, listing.sha);
  const path = cache.snapshotDir(listing.sha);
  log.info({ repo: repoId, revision, commit: listing.sha, path }, `model ${repoId} ready at ${path}`);
  return { kind: 'dir', path, repoId, revision: listing.sha, defaultName: repoId };
}

/** With `progress: 'none'` nothing is printed: info and debug go nowhere, warnings only to a given log. */
function quietFor(mode: ResolveOptions['progress'], given: ModelPathLog | undefined): ModelPathLog {
  if (mode !== 'none') return given ?? defaultLog();
  if (given === undefined) return silentLog;
  return { debug() {}, info() {}, warn: (fields, message) => given.warn(fields, message) };
}

/** Runs `fn` over `items`, `limit` at a time; on the first failure aborts `stop`, waits for the rest, rethrows. */
async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>, stop: AbortController): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async () => {
    while (failure === undefined && next < items.length) {
      const item = items[next++] as T;
      try {
        await fn(item);
      } catch (error) {
        if (failure === undefined) {
          failure = { error };
          stop.abort(error);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure.error;
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal, repoId: string): Promise<T> {
  if (signal.aborted) return Promise.reject(new Cancelled(`resolving model '${repoId}' cancelled`));
  return new Promise<T>((ok, fail) => {
    const onAbort = () => fail(new Cancelled(`resolving model '${repoId}' cancelled`));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(ok, fail).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

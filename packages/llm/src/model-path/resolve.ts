import { readdir, readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Cancelled, DynamoException, InvalidArgument } from '@dynamo/runtime';
import { selectFiles } from './files.js';
import { HfRepoCache } from './hf-cache.js';
import { fetchFile, type DownloadContext } from './hf-download.js';
import { loadHfEnv, type HfEnv } from './hf-env.js';
import { HubClient } from './hf-http.js';
import { resolveLocalPath } from './local.js';
import type { Log } from '@dynamo/runtime';
import { defaultLog, silentLog } from './log.js';
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
  const gguf = options.ggufFile;
  if (gguf !== undefined) {
    if (!/^[^/\\]+\.gguf$/i.test(gguf)) throw new InvalidArgument(`ggufFile '${gguf}' is not the name of a .gguf file at the top of the repo`);
    const commit = await cache.commitOf(revision);
    const cached = commit === undefined ? undefined : join(cache.snapshotDir(commit), gguf);
    if (
      cached !== undefined &&
      (await stat(cached).then(
        (s) => s.isFile(),
        () => false,
      ))
    ) {
      log.debug({ repo: repoId, revision, commit, path: cached }, `${gguf} of ${repoId} found in the Hugging Face cache`);
      return { kind: 'gguf', path: cached, repoId, revision: commit!, defaultName: repoId };
    }
  } else {
    const hit = await cache.findSnapshot(revision, ignoreWeights);
    if (hit) {
      // A snapshot of GGUF files alone may hold only those asked for before: which .gguf the repo
      // means is the Hub listing's to say, unless the Hub cannot be asked.
      const names = await readdir(hit.dir);
      const ggufs = names.filter((n) => /\.gguf$/i.test(n));
      if (names.includes('config.json') || (hf.offline && ggufs.length === 1)) {
        log.debug({ repo: repoId, revision, commit: hit.commit, path: hit.dir }, `model ${repoId} found in the Hugging Face cache`);
        if (!names.includes('config.json')) return { kind: 'gguf', path: join(hit.dir, ggufs[0]!), repoId, revision: hit.commit, defaultName: repoId };
        return { kind: 'dir', path: hit.dir, repoId, revision: hit.commit, defaultName: repoId };
      }
    }
  }
  if (hf.offline) {
    throw new InvalidArgument(
      `model '${repoId}' (revision '${revision}'${gguf ? `, ${gguf}` : ignoreWeights ? '' : ', with weights'}) is not in the Hugging Face cache at ${cache.root}, ` +
        'and HF_HUB_OFFLINE is set so it cannot be downloaded: download it first or unset HF_HUB_OFFLINE',
    );
  }
  const key = JSON.stringify([hf.hubCache, hf.endpoint, repoId, revision, ignoreWeights, gguf]);
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
  log: Log,
): Promise<ResolvedModelPath> {
  const token =
    hf.token ??
    (await readFile(hf.tokenPath, 'utf8').then(
      (t) => t.trim() || undefined,
      () => undefined,
    ));
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
  const ggufs = listing.files.filter((f) => !f.includes('/') && /\.gguf$/i.test(f));
  const gguf = options.ggufFile ?? (listing.files.includes('config.json') || ggufs.length !== 1 ? undefined : ggufs[0]);
  if (options.ggufFile !== undefined && !ggufs.includes(options.ggufFile)) {
    throw new InvalidArgument(
      `model '${repoId}' (revision '${revision}') on ${hf.endpoint} has no ${options.ggufFile} (its .gguf files: ${ggufs.join(', ') || 'none'})`,
    );
  }
  const files = gguf === undefined ? selectFiles(listing.files, ignoreWeights) : [gguf];
  if (gguf === undefined && !files.includes('config.json')) {
    throw new InvalidArgument(
      `model '${repoId}' (revision '${revision}') on ${hf.endpoint} has no config.json` +
        (ggufs.length > 1 ? `: for a repo of GGUF files, pick one of ${ggufs.join(', ')} (the ggufFile option; dynamo-llama-cpp --gguf-file)` : ''),
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
    if (gguf === undefined) await fetchFile(ctx, 'config.json');
  } finally {
    progress.stop();
  }
  await cache.writeRef(revision, listing.sha);
  const dir = cache.snapshotDir(listing.sha);
  const path = gguf === undefined ? dir : join(dir, gguf);
  log.info({ repo: repoId, revision, commit: listing.sha, path }, `model ${repoId} ready at ${path}`);
  return { kind: gguf === undefined ? 'dir' : 'gguf', path, repoId, revision: listing.sha, defaultName: repoId };
}

/** With `progress: 'none'` nothing is printed: info and debug go nowhere, warnings only to a given log. */
function quietFor(mode: ResolveOptions['progress'], given: Log | undefined): Log {
  if (mode !== 'none') return given ?? defaultLog();
  if (given === undefined) return silentLog;
  return { debug() {}, info() {}, warn: given.warn.bind(given), error: given.error.bind(given) };
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

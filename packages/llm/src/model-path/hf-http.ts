import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { Cancelled, CannotConnect, ConnectionTimeout, InvalidArgument, parseOrThrow, type DynamoException } from '@dynamo/runtime';
import type { Log } from '@dynamo/runtime';

/** What a request was about, for error messages. */
interface Subject {
  repoId: string;
  revision?: string;
  file?: string;
}

/** A file's identity as the Hub reports it before downloading. */
export interface FileMetadata {
  /** `X-Linked-Etag` or `ETag`, unquoted: the sha256 for LFS files, a git blob hash otherwise. */
  etag: string;
  /** `X-Linked-Size` or `Content-Length`, when given. */
  size?: number;
  /** Where the bytes are: the redirect target, or the resolve URL itself. */
  url: string;
}

const transient = new WeakSet<Error>();

/** True for failures worth retrying: dropped connections, timeouts, 429 and 5xx answers. */
export function isTransient(err: unknown): boolean {
  return err instanceof Error && transient.has(err);
}

/** Marks `err` as worth retrying and returns it. */
export function markTransient<E extends Error>(err: E): E {
  transient.add(err);
  return err;
}

const listingSchema = z.object({
  sha: z.string().regex(/^[0-9a-f]{40}$/, 'expected a 40-hex-digit commit hash'),
  siblings: z.array(z.object({ rfilename: z.string().min(1) })),
});

const METADATA_ATTEMPTS = 3;
const METADATA_BACKOFF_MS = 250;
const NO_RETRY_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'ERR_INVALID_URL']);

function errorCode(err: unknown, depth = 0): string | undefined {
  if (!(err instanceof Error) || depth > 4) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  for (const inner of (err as { errors?: unknown[] }).errors ?? []) {
    const c = errorCode(inner, depth + 1);
    if (c) return c;
  }
  return errorCode(err.cause, depth + 1);
}

function normalizeEtag(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
}

function optionalSize(value: string | null): number | undefined {
  const n = value === null ? NaN : Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/** Settings for {@link HubClient}. */
export interface HubClientOptions {
  endpoint: string;
  token?: string;
  fetch: typeof fetch;
  metadataTimeoutMs: number;
  signal?: AbortSignal;
  log: Log;
}

/** The few Hugging Face Hub HTTP calls a download needs, with Dynamo errors that name the repo. */
export class HubClient {
  private readonly origin: string;

  constructor(private readonly options: HubClientOptions) {
    this.origin = new URL(options.endpoint).origin;
  }

  /** Lists a repo revision: `GET /api/models/{repo}/revision/{rev}` → commit hash and file names. */
  async listFiles(repoId: string, revision: string): Promise<{ sha: string; files: string[] }> {
    const url = `${this.options.endpoint}/api/models/${repoId}/revision/${encodeURIComponent(revision)}`;
    const res = await this.metadataRequest('GET', url, { repoId, revision });
    const body: unknown = await res.json().catch((err: unknown) => {
      throw new InvalidArgument(`the listing of model '${repoId}' from ${url} is not JSON: is HF_ENDPOINT a Hugging Face Hub?`, { cause: err });
    });
    const listing = parseOrThrow(listingSchema, body, `listing of '${repoId}' from ${url}`);
    return { sha: listing.sha, files: listing.siblings.map((s) => s.rfilename) };
  }

  /**
   * `HEAD /{repo}/resolve/{commit}/{file}`, following redirects within the Hub (a renamed repo)
   * but not to another host (a CDN's signed URL): the file's metadata is on that redirect, as
   * `huggingface_hub` reads it.
   */
  async fileMetadata(repoId: string, commit: string, file: string): Promise<FileMetadata> {
    const path = file.split('/').map(encodeURIComponent).join('/');
    let url = `${this.options.endpoint}/${repoId}/resolve/${commit}/${path}`;
    for (let hop = 0; hop < 5; hop++) {
      const res = await this.metadataRequest('HEAD', url, { repoId, revision: commit, file });
      const location = res.headers.get('location');
      const target = location ? new URL(location, url) : undefined;
      if (res.status >= 300 && res.status < 400 && target?.origin === new URL(url).origin) {
        url = target.toString();
        continue;
      }
      const etag = res.headers.get('x-linked-etag') ?? res.headers.get('etag');
      if (!etag) throw new InvalidArgument(`no ETag in the answer for '${repoId}/${file}' from ${url}: is HF_ENDPOINT a Hugging Face Hub?`);
      return {
        etag: normalizeEtag(etag),
        size: optionalSize(res.headers.get('x-linked-size') ?? res.headers.get('content-length')),
        url: target?.toString() ?? url,
      };
    }
    throw new InvalidArgument(`too many redirects for '${repoId}/${file}' from ${this.options.endpoint}`);
  }

  /**
   * `GET url`, following redirects, from byte `start` on (a `Range` request when > 0). Returns
   * 200, 206 and 416 answers; throws for the rest (transient ones marked).
   */
  async download(url: string, start: number, subject: Subject, signal: AbortSignal): Promise<Response> {
    const headers = this.headers(url);
    if (start > 0) headers.range = `bytes=${start}-`;
    let res: Response;
    try {
      res = await this.options.fetch(url, { headers, redirect: 'follow', signal });
    } catch (err) {
      throw this.networkError(err, 'GET', url);
    }
    if (res.status === 200 || res.status === 206 || res.status === 416) return res;
    await res.body?.cancel().catch(() => undefined);
    throw this.statusError(res.status, res.headers.get('x-error-code'), url, subject);
  }

  private headers(url: string): Record<string, string> {
    // identity: Content-Length and byte ranges then count the bytes stored on disk.
    const headers: Record<string, string> = { 'user-agent': 'dynamo-ts; @dynamo/llm', 'accept-encoding': 'identity' };
    // The token goes to the Hub only, never to a CDN it redirects to.
    if (this.options.token && new URL(url).origin === this.origin) headers.authorization = `Bearer ${this.options.token}`;
    return headers;
  }

  private async metadataRequest(method: 'GET' | 'HEAD', url: string, subject: Subject): Promise<Response> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.metadataAttempt(method, url, subject);
      } catch (err) {
        if (!isTransient(err) || attempt >= METADATA_ATTEMPTS) throw err;
        const delay = METADATA_BACKOFF_MS * 2 ** (attempt - 1);
        this.options.log.warn({ url, attempt, error: (err as Error).message }, `Hub request failed, retrying in ${delay} ms`);
        await sleep(delay, undefined, { signal: this.options.signal });
      }
    }
  }

  private async metadataAttempt(method: 'GET' | 'HEAD', url: string, subject: Subject): Promise<Response> {
    const timeout = AbortSignal.timeout(this.options.metadataTimeoutMs);
    const signal = this.options.signal ? AbortSignal.any([this.options.signal, timeout]) : timeout;
    let res: Response;
    try {
      res = await this.options.fetch(url, { method, headers: this.headers(url), redirect: 'manual', signal });
    } catch (err) {
      throw this.networkError(err, method, url);
    }
    if (res.ok || (res.status >= 300 && res.status < 400)) return res;
    await res.body?.cancel().catch(() => undefined);
    throw this.statusError(res.status, res.headers.get('x-error-code'), url, subject);
  }

  /** Maps a failed fetch to `Cancelled`, `ConnectionTimeout` or `CannotConnect`. */
  networkError(err: unknown, method: string, url: string): DynamoException {
    if (this.options.signal?.aborted) return new Cancelled(`model download cancelled (${method} ${url})`, { cause: err });
    const { endpoint } = this.options;
    if (err instanceof Error && err.name === 'TimeoutError') {
      return markTransient(
        new ConnectionTimeout(`no answer from the Hugging Face Hub at ${endpoint} in time (${method} ${url}): ${err.message}`, { cause: err }),
      );
    }
    const code = errorCode(err);
    const error = new CannotConnect(
      `cannot reach the Hugging Face Hub at ${endpoint} (${method} ${url}): ${code ?? (err as Error)?.message ?? String(err)}; ` +
        'check HF_ENDPOINT and the network, or set HF_HUB_OFFLINE=1 to use only the local cache',
      { cause: err },
    );
    return code !== undefined && NO_RETRY_CODES.has(code) ? error : markTransient(error);
  }

  private statusError(status: number, errorCode: string | null, url: string, s: Subject): DynamoException {
    const { endpoint, token } = this.options;
    const model = `model '${s.repoId}'`;
    if (status === 404) {
      if (errorCode === 'RevisionNotFound') return new InvalidArgument(`revision '${s.revision}' of ${model} not found on ${endpoint} (404)`);
      if (errorCode === 'EntryNotFound') return new InvalidArgument(`file '${s.file}' of ${model} not found on ${endpoint} (404)`);
      return new InvalidArgument(`${model} not found on ${endpoint} (404)`);
    }
    if (status === 401) {
      return new InvalidArgument(
        token
          ? `${model} on ${endpoint} refused the HF_TOKEN given (401): check that the token is valid`
          : `${model} on ${endpoint} needs authentication (401): set HF_TOKEN to an access token that can read it (private or gated model), or check the name`,
      );
    }
    if (status === 403) {
      return new InvalidArgument(
        `access to ${model} on ${endpoint} denied (403): ` +
          (token
            ? 'the HF_TOKEN given may not read it (for a gated model, accept its terms on the Hub first)'
            : 'set HF_TOKEN to an access token that can read it'),
      );
    }
    if (status === 429 || status >= 500) return markTransient(new CannotConnect(`the Hugging Face Hub at ${endpoint} answered ${status} for ${url}`));
    return new InvalidArgument(`unexpected answer ${status} from ${url} for ${model}`);
  }
}

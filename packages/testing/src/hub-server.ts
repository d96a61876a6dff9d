/**
 * A local stand-in for the Hugging Face Hub, over real HTTP on 127.0.0.1: serves repo revisions
 * from directories of files with the Hub's URLs, redirects and headers, so model-path tests never
 * touch the internet. `huggingface_hub` itself can download from it too (it also serves `/tree`).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, relative, sep } from 'node:path';

import { QWEN3_CONFIG, qwen3ModelDir } from './qwen3-model.js';

/** One revision of a repo: its commit hash and the directory holding its files. */
export interface HubRevision {
  sha: string;
  dir: string;
}

/** Options for {@link startHubServer}. */
export interface HubServerOptions {
  /** repo id → revision name (branch or tag) → contents. Each revision is also reachable by its sha. */
  repos: Record<string, Record<string, HubRevision>>;
  /** When set, the API and resolve URLs answer 401 unless sent `Authorization: Bearer <token>`. */
  token?: string;
}

/** A request as the server saw it. */
export interface HubRequest {
  method: string;
  path: string;
  range?: string;
  authorization?: string;
}

/** A running fake Hub. */
export interface HubServer {
  /** `http://127.0.0.1:<port>`: use as `HF_ENDPOINT`. */
  url: string;
  /** Every request received, in order. */
  requests: HubRequest[];
  /** The next response carrying `file` (a repo path such as `tokenizer.json`) sends `bytes` bytes, then the connection is cut. Once. */
  dropConnection(file: string, bytes: number): void;
  close(): Promise<void>;
}

interface FileEntry {
  name: string;
  body: Buffer;
  lfs: boolean;
  /** sha256 for LFS files, git blob sha1 otherwise, as the Hub reports them. */
  etag: string;
}

/** Files the real Hub keeps in LFS: weights, and anything big (the Hub's threshold is 10 MB; ours is lower). */
function isLfs(name: string, size: number): boolean {
  return /\.(safetensors|bin|gguf|pt|pth|h5|msgpack)$/.test(name) || size >= 1_000_000;
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    return statSync(full).isDirectory() ? walk(full) : [full];
  });
}

function loadRevision(rev: HubRevision): Map<string, FileEntry> {
  const files = new Map<string, FileEntry>();
  for (const full of walk(rev.dir)) {
    const name = relative(rev.dir, full).split(sep).join('/');
    const body = readFileSync(full);
    const lfs = isLfs(name, body.length);
    const etag = lfs ? createHash('sha256').update(body).digest('hex') : createHash('sha1').update(`blob ${body.length}\0`).update(body).digest('hex');
    files.set(name, { name, body, lfs, etag });
  }
  return files;
}

/** Starts the fake Hub on a free loopback port. */
export async function startHubServer(options: HubServerOptions): Promise<HubServer> {
  // repo → revision name or sha → { sha, files }
  const repos = new Map<string, Map<string, { sha: string; files: Map<string, FileEntry> }>>();
  const blobs = new Map<string, FileEntry>();
  for (const [repoId, revisions] of Object.entries(options.repos)) {
    const byRev = new Map<string, { sha: string; files: Map<string, FileEntry> }>();
    for (const [name, rev] of Object.entries(revisions)) {
      const entry = { sha: rev.sha, files: loadRevision(rev) };
      byRev.set(name, entry);
      byRev.set(rev.sha, entry);
      for (const f of entry.files.values()) if (f.lfs) blobs.set(f.etag, f);
    }
    repos.set(repoId, byRev);
  }
  const requests: HubRequest[] = [];
  const drops = new Map<string, number>();
  let url = '';
  /** Blob storage lives on its own port, a different origin, as the Hub's CDN is another host. */
  let cdnUrl = '';

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };

  const authorized = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (options.token === undefined || req.headers.authorization === `Bearer ${options.token}`) return true;
    json(res, 401, { error: 'Invalid credentials in Authorization header' });
    return false;
  };

  /** Sends `file` (honouring `Range: bytes=N-`), or cuts the connection early if a drop is armed. */
  const sendFile = (req: IncomingMessage, res: ServerResponse, file: FileEntry, headers: Record<string, string>) => {
    const size = file.body.length;
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    if (start >= size && m) {
      res.writeHead(416, { 'content-range': `bytes */${size}` });
      res.end();
      return;
    }
    const body = file.body.subarray(start);
    res.writeHead(m ? 206 : 200, {
      ...headers,
      'content-type': 'application/octet-stream',
      'content-length': String(body.length),
      'accept-ranges': 'bytes',
      ...(m ? { 'content-range': `bytes ${start}-${size - 1}/${size}` } : {}),
    });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    const cut = drops.get(file.name);
    if (cut !== undefined && cut < body.length) {
      drops.delete(file.name);
      res.write(body.subarray(0, cut), () => res.socket?.destroy());
      return;
    }
    res.end(body);
  };

  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    requests.push({ method: req.method ?? 'GET', path, range: req.headers.range, authorization: req.headers.authorization });

    // Blob storage ("CDN") for LFS files: no auth, like the Hub's signed URLs. (Both ports answer every path.)
    const cdn = /^\/cdn\/([0-9a-f]{64})$/.exec(path);
    if (cdn) {
      const blob = blobs.get(cdn[1] as string);
      if (!blob) return json(res, 404, { error: 'no such blob' });
      return sendFile(req, res, blob, { etag: `"${blob.etag}"` });
    }

    const api = /^\/api\/models\/([^/]+\/[^/]+)\/(revision|tree)\/([^/?]+)(?:\?.*)?$/.exec(path);
    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    const repoId = decodeURIComponent((api ?? resolve)?.[1] ?? '');
    if (!api && !resolve) return json(res, 404, { error: 'not found' });
    if (!authorized(req, res)) return;
    const repo = repos.get(repoId);
    if (!repo) return json(res, 404, { error: 'Repository not found' }, { 'x-error-code': 'RepoNotFound' });
    const rev = repo.get(decodeURIComponent((api ? api[3] : resolve?.[2]) ?? ''));
    if (!rev) return json(res, 404, { error: 'Invalid rev id' }, { 'x-error-code': 'RevisionNotFound' });

    if (api?.[2] === 'tree') {
      // The listing newer huggingface_hub clients use (flat, as with ?recursive=true).
      const tree = [...rev.files.values()].map((f) => ({
        type: 'file',
        path: f.name,
        size: f.body.length,
        oid: f.lfs ? createHash('sha1').update(`blob ${f.body.length}\0`).update(f.body).digest('hex') : f.etag,
        ...(f.lfs ? { lfs: { oid: f.etag, size: f.body.length, pointerSize: 134 } } : {}),
      }));
      return json(res, 200, tree);
    }
    if (api) {
      return json(res, 200, { id: repoId, sha: rev.sha, siblings: [...rev.files.keys()].map((rfilename) => ({ rfilename })) });
    }
    const name = (resolve?.[3] ?? '').split('/').map(decodeURIComponent).join('/');
    const file = rev.files.get(name);
    if (!file) return json(res, 404, { error: 'Entry not found' }, { 'x-error-code': 'EntryNotFound' });
    const common = { 'x-repo-commit': rev.sha };
    if (file.lfs) {
      // LFS: redirect to the blob, with the file's identity in X-Linked-* headers.
      res.writeHead(302, {
        ...common,
        location: `${cdnUrl}/cdn/${file.etag}`,
        etag: `"${file.etag}"`,
        'x-linked-etag': `"${file.etag}"`,
        'x-linked-size': String(file.body.length),
        'content-length': '0',
      });
      return res.end();
    }
    // A regular git file: served directly, ETag = git blob sha1.
    return sendFile(req, res, file, { ...common, etag: `"${file.etag}"` });
  };

  const servers = [createServer(handler), createServer(handler)];
  const ports: number[] = [];
  for (const server of servers) {
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    ports.push((server.address() as AddressInfo).port);
  }
  url = `http://127.0.0.1:${ports[0]}`;
  cdnUrl = `http://127.0.0.1:${ports[1]}`;
  return {
    url,
    requests,
    dropConnection: (file, bytes) => void drops.set(file, bytes),
    close: () =>
      Promise.all(
        servers.map(
          (server) =>
            new Promise<void>((ok) => {
              server.closeAllConnections();
              server.close(() => ok());
            }),
        ),
      ).then(() => undefined),
  };
}

/** What {@link writeModelRepo} puts in a fake repo, for assertions. */
export interface ModelRepoFiles {
  dir: string;
  config: Record<string, unknown>;
  /** The fake weights (random bytes). */
  weights: Buffer;
}

/**
 * Writes a small model repo as it looks on the Hub: a `config.json`, Qwen3's real tokenizer files,
 * `generation_config.json`, fake weights, and the files Dynamo never downloads (README, LICENSE,
 * `.gitattributes`, an image).
 */
export function writeModelRepo(dir: string, config: Record<string, unknown> = {}, weightBytes = 300_000): ModelRepoFiles {
  mkdirSync(join(dir, 'figures'), { recursive: true });
  const fullConfig = { ...QWEN3_CONFIG, ...config };
  qwen3ModelDir({ dir, config });
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ temperature: 0.6, top_p: 0.95 }));
  const weights = createHash('sha512').update(dir).digest();
  const big = Buffer.alloc(weightBytes);
  for (let i = 0; i < big.length; i++) big[i] = (weights[i % weights.length] as number) ^ (i & 0xff);
  writeFileSync(join(dir, 'model.safetensors'), big);
  writeFileSync(join(dir, 'README.md'), '# tiny model\n');
  writeFileSync(join(dir, 'LICENSE'), 'Apache-2.0\n');
  writeFileSync(join(dir, '.gitattributes'), '*.safetensors filter=lfs diff=lfs merge=lfs -text\n');
  writeFileSync(join(dir, 'figures', 'logo.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  return { dir, config: fullConfig, weights: big };
}

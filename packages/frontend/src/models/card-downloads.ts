import { randomUUID } from 'node:crypto';
import { mkdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { CheckedFile, ModelDeploymentCard } from '@dynamo/llm';
import { fileChecksumBlake3, mdcsum, slugify } from '@dynamo/llm/internal';
import { InvalidArgument } from '@dynamo/runtime';

/** How long one card file may take to download. */
const DOWNLOAD_TIMEOUT_MS = 120_000;

/** Where downloaded card files are kept: the folder a stock frontend uses, so both share it. */
export function defaultCardCache(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'dynamo', 'mdc');
}

/** Whether a card file is served over HTTP rather than read from disk or the Hub. */
export function isHttpCardFile(file: CheckedFile): boolean {
  return /^https?:\/\//i.test(file.path);
}

/**
 * Downloads a card's http(s) files, as a stock frontend does for a worker that self-hosts them
 * on its system server (`http://host:DYN_SYSTEM_PORT/v1/metadata/...`): each into
 * `blobs/<blake3 hex>` under `cacheDir`, checked against the card's checksum, then linked as
 * `by-slug/<slug>/<mdcsum>/<file name>`, one folder per card that a `LocalModel` can load.
 * Returns each URL's local path.
 */
export async function downloadCardFiles(card: ModelDeploymentCard, files: readonly CheckedFile[], cacheDir: string): Promise<Map<string, string>> {
  const folder = join(cacheDir, 'by-slug', slugify(card.display_name), mdcsum(card));
  await mkdir(folder, { recursive: true });
  await mkdir(join(cacheDir, 'blobs'), { recursive: true });
  const local = new Map<string, string>();
  await Promise.all(
    files.map(async (file) => {
      const name = decodeURIComponent(new URL(file.path).pathname.split('/').at(-1) ?? '');
      if (name === '' || name === '.' || name === '..' || name.includes('/'))
        throw new InvalidArgument(`card file ${file.path}: the URL does not end in a file name`);
      const blob = await fetchBlob(file, cacheDir);
      const link = join(folder, name);
      await symlink(blob, link).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      local.set(file.path, link);
    }),
  );
  return local;
}

/** The blob holding `file`'s bytes, downloaded unless it is already cached. */
async function fetchBlob(file: CheckedFile, cacheDir: string): Promise<string> {
  const blob = join(cacheDir, 'blobs', file.checksum.slice('blake3:'.length));
  if (
    await stat(blob).then(
      (s) => s.isFile(),
      () => false,
    )
  )
    return blob;
  let res: Response;
  try {
    res = await fetch(file.path, { signal: AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS) });
  } catch (err) {
    throw new InvalidArgument(`card file ${file.path}: download failed (${(err as Error).message})`, { cause: err });
  }
  if (!res.ok) throw new InvalidArgument(`card file ${file.path}: HTTP ${res.status} ${res.statusText}`);
  // Written aside and renamed once checked: a blob's name always matches its bytes.
  const partial = `${blob}.${randomUUID()}.partial`;
  try {
    await writeFile(partial, Buffer.from(await res.arrayBuffer()));
    const checksum = await fileChecksumBlake3(partial);
    if (checksum !== file.checksum) throw new InvalidArgument(`card file ${file.path}: its bytes have checksum ${checksum} but the card says ${file.checksum}`);
    await rename(partial, blob);
  } finally {
    await rm(partial, { force: true });
  }
  return blob;
}

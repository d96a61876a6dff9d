import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, readlink, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { isWeightFile } from './files.js';
import { isCommitHash } from './repo-id.js';

/** `Org/Name` → `models--Org--Name`, the folder `huggingface_hub` caches a model repo in. */
export function repoFolderName(repoId: string): string {
  return `models--${repoId.replaceAll('/', '--')}`;
}

/**
 * If `dir` is a snapshot inside a Hugging Face cache (`.../models--Org--Name/snapshots/{commit}`),
 * returns its repo id and commit.
 */
export function snapshotOrigin(dir: string): { repoId: string; revision: string } | undefined {
  const parts = dir.split(sep);
  const [repoFolder, snapshots, commit] = parts.slice(-3);
  const m = /^models--([^-].*?)--(.+)$/.exec(repoFolder ?? '');
  if (!m || snapshots !== 'snapshots' || commit === undefined || !isCommitHash(commit)) return undefined;
  return { repoId: `${m[1]}/${m[2]}`, revision: commit };
}

async function exists(path: string): Promise<boolean> {
  // stat follows symlinks: a snapshot link whose blob is gone does not count.
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Writes `data` to `path` atomically (temp file + rename), creating parent folders. */
async function writeAtomic(path: string, data: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, data);
  await rename(tmp, path);
}

/**
 * One model repo in the Hugging Face cache, laid out exactly as `huggingface_hub` lays it out:
 * `refs/{revision}` holds a commit hash, `snapshots/{commit}/{file}` are relative symlinks to
 * `blobs/{etag}`, partial downloads are `blobs/{etag}.incomplete`.
 */
export class HfRepoCache {
  /** `{hubCache}/models--Org--Name`. */
  readonly root: string;

  constructor(
    readonly hubCache: string,
    readonly repoId: string,
  ) {
    this.root = join(hubCache, repoFolderName(repoId));
  }

  snapshotDir(commit: string): string {
    return join(this.root, 'snapshots', commit);
  }

  blobPath(etag: string): string {
    return join(this.root, 'blobs', etag);
  }

  /** Our cross-process download lock; named apart from `huggingface_hub`'s own `.lock` files. */
  lockPath(etag: string): string {
    return join(this.hubCache, '.locks', repoFolderName(this.repoId), `${etag}.dynamo-lock`);
  }

  /** The commit a revision points at: the revision itself for a commit hash, else `refs/{revision}`. */
  async commitOf(revision: string): Promise<string | undefined> {
    if (isCommitHash(revision)) return revision;
    const ref = await readFile(join(this.root, 'refs', revision), 'utf8').catch(() => undefined);
    const commit = ref?.trim();
    return commit && isCommitHash(commit) ? commit : undefined;
  }

  /** Records `refs/{revision}` → commit (nothing for a commit hash, as `huggingface_hub` does). */
  async writeRef(revision: string, commit: string): Promise<void> {
    if (revision === commit) return;
    await writeAtomic(join(this.root, 'refs', revision), commit);
  }

  /** True when the blob is present (and, if `size` is given, has that size). */
  async hasBlob(etag: string, size?: number): Promise<boolean> {
    const s = await stat(this.blobPath(etag)).catch(() => undefined);
    return s?.isFile() === true && (size === undefined || s.size === size);
  }

  /** Points `snapshots/{commit}/{file}` at `blobs/{etag}` with a relative symlink, replacing atomically. */
  async linkFile(commit: string, file: string, etag: string): Promise<void> {
    const link = join(this.snapshotDir(commit), ...file.split('/'));
    const target = relative(dirname(link), this.blobPath(etag));
    if ((await readlink(link).catch(() => undefined)) === target) return;
    await mkdir(dirname(link), { recursive: true });
    const tmp = `${link}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    await symlink(target, tmp);
    await rename(tmp, link).catch(async (err: unknown) => {
      await rm(tmp, { force: true });
      throw err;
    });
  }

  /**
   * The cached snapshot for `revision` if it holds what a model card needs: `config.json` (or a
   * `.gguf`), and unless `ignoreWeights`, the weights (every shard a `*.index.json` names, else at
   * least one weights file).
   */
  async findSnapshot(revision: string, ignoreWeights: boolean): Promise<{ dir: string; commit: string } | undefined> {
    const commit = await this.commitOf(revision);
    if (commit === undefined) return undefined;
    const dir = this.snapshotDir(commit);
    const names = await readdir(dir).catch(() => undefined);
    if (names === undefined) return undefined;
    const hasCard = (await exists(join(dir, 'config.json'))) || names.some((n) => /\.gguf$/i.test(n));
    if (!hasCard) return undefined;
    if (!ignoreWeights && !(await this.hasWeights(dir, names))) return undefined;
    return { dir, commit };
  }

  private async hasWeights(dir: string, names: string[]): Promise<boolean> {
    for (const index of ['model.safetensors.index.json', 'pytorch_model.bin.index.json']) {
      if (!names.includes(index)) continue;
      const shards = await readFile(join(dir, index), 'utf8')
        .then((text) => Object.values((JSON.parse(text) as { weight_map?: Record<string, string> }).weight_map ?? {}))
        .catch(() => undefined);
      if (shards === undefined || shards.length === 0) return false;
      const present = await Promise.all([...new Set(shards)].map((s) => exists(join(dir, s))));
      return present.every(Boolean);
    }
    for (const n of names.filter(isWeightFile)) if (await exists(join(dir, n))) return true;
    return false;
  }
}

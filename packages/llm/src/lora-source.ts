import { stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { InvalidArgument, type Log } from '@dynamo/runtime';
import { resolveModelPath } from './model-path/index.js';

/** Options for {@link resolveLoraSource}. */
export interface LoraSourceOptions {
  /** `HOME` and the Hugging Face variables (`HF_ENDPOINT`, `HF_TOKEN`, ...); default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where remote adapters are kept (a worker's `DYN_LORA_PATH`); default {@link loraCacheDir}. */
  cacheDir?: string;
  /** Where download progress is logged. */
  log?: Log;
  /** Aborts a download; a later call resumes it. */
  signal?: AbortSignal;
}

/** Where remote adapters are kept by default: `~/.cache/dynamo_loras` (`/tmp/.cache/…` without a home), as stock Dynamo keeps them. */
export function loraCacheDir(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return join(env.HOME || '/tmp', '.cache', 'dynamo_loras');
}

/**
 * Turns a LoRA adapter's source URI into a `file://` URI of its files on local disk, fetching
 * remote ones first:
 * - `file://<path>` or a plain path: used in place; it must exist;
 * - `hf://<Org>/<Name>[@revision]`: downloaded from the Hugging Face Hub (`HF_ENDPOINT`,
 *   `HF_TOKEN`) into `cacheDir`, in the Hub cache's layout, unless already there; a repo
 *   holding one `.gguf` adapter gives that file, any other repo its folder (which needs a
 *   `config.json`, as a model's does).
 * Any other scheme (stock also knows `s3://`) is refused with `InvalidArgument` naming it, as is a
 * missing file or repo.
 */
export async function resolveLoraSource(uri: string, options: LoraSourceOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(uri)?.[1]?.toLowerCase();
  if (scheme === undefined || scheme === 'file') {
    let path: string;
    try {
      path = scheme === undefined ? resolve(uri) : fileURLToPath(uri);
    } catch (err) {
      throw new InvalidArgument(`LoRA source ${uri}: not a valid file URI (${(err as Error).message})`);
    }
    if (
      !(await stat(path).then(
        () => true,
        () => false,
      ))
    )
      throw new InvalidArgument(`LoRA source ${uri}: no such file or folder`);
    return pathToFileURL(path).href;
  }
  if (scheme === 'hf') {
    try {
      const local = await resolveModelPath(uri, {
        env: { ...env, HF_HUB_CACHE: options.cacheDir ?? loraCacheDir(env) },
        ignoreWeights: false,
        progress: 'log',
        ...(options.log && { log: options.log }),
        ...(options.signal && { signal: options.signal }),
      });
      return pathToFileURL(local.path).href;
    } catch (err) {
      if (err instanceof InvalidArgument) throw new InvalidArgument(`LoRA source ${uri}: ${err.message}`, { cause: err });
      throw err;
    }
  }
  throw new InvalidArgument(`LoRA source ${uri}: the ${scheme}:// scheme is not supported (use file://<path>, a path, or hf://<Org>/<Name>)`);
}

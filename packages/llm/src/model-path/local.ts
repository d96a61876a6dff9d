import { stat } from 'node:fs/promises';
import { basename, resolve } from 'node:path';
import { InvalidArgument } from '@dynamo/runtime';
import { snapshotOrigin } from './hf-cache.js';
import type { ResolvedModelPath } from './types.js';

/**
 * Classifies a model path on local disk: a directory (a Hugging Face checkout or cache snapshot)
 * or a `.gguf` file. Returns undefined when nothing exists there; throws `InvalidArgument` for any
 * other file, or a path that cannot be read.
 */
export async function resolveLocalPath(modelPath: string): Promise<ResolvedModelPath | undefined> {
  const path = resolve(modelPath);
  let info;
  try {
    info = await stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw new InvalidArgument(`cannot read model path '${modelPath}' (${path}): ${code ?? (err as Error).message}`, { cause: err });
  }
  if (info.isDirectory()) {
    const origin = snapshotOrigin(path);
    if (origin) return { kind: 'dir', path, ...origin, defaultName: origin.repoId };
    return { kind: 'dir', path, defaultName: basename(path) };
  }
  if (info.isFile() && /\.gguf$/i.test(path)) {
    return { kind: 'gguf', path, defaultName: basename(path).replace(/\.gguf$/i, '') };
  }
  throw new InvalidArgument(
    `model path '${modelPath}' (${path}) is a file but not a .gguf model: pass a model directory (config.json, tokenizer files), a .gguf file or a Hugging Face repo id`,
  );
}

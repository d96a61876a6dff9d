import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';

import { InvalidArgument } from '@dynamo/backend';
import { resolveModelPath } from '@dynamo/llm';

/**
 * The `.gguf` file `modelPath` names: a local file; in a local folder, the one `ggufFile` names
 * (default: its only `.gguf`); or in a Hugging Face repo (`Org/Name[@revision]`, `hf://...`), the
 * `ggufFile` one (default: the repo's only `.gguf`), downloaded alone into the Hugging Face cache
 * with a progress bar on a terminal (`HF_*` variables from `env`). Throws {@link InvalidArgument} saying what is missing.
 */
export async function resolveGguf(modelPath: string, ggufFile?: string, env: Readonly<Record<string, string | undefined>> = process.env): Promise<string> {
  const path = resolve(modelPath);
  const info = await stat(path).catch(() => undefined);
  if (info?.isFile()) {
    if (ggufFile !== undefined) throw new InvalidArgument(`--gguf-file picks a file inside a folder or repo, but --model-path ${modelPath} is a file`);
    return path;
  }
  if (info?.isDirectory()) return ggufInFolder(modelPath, path, ggufFile);
  let resolved;
  try {
    resolved = await resolveModelPath(modelPath, { env, ...(ggufFile !== undefined && { ggufFile }) });
  } catch (err) {
    if (err instanceof InvalidArgument && /neither an existing file or directory/.test(err.message)) {
      throw new InvalidArgument(
        `--model-path ${modelPath}: no such file or folder, and not a Hugging Face repo id (dynamo-llama-cpp loads a .gguf file, one in a folder, or one of a Hub repo)`,
      );
    }
    throw err;
  }
  return resolved.kind === 'gguf' ? resolved.path : ggufInFolder(modelPath, resolved.path, ggufFile);
}

/** The names of the `.gguf` files in folder `path`, sorted. */
export async function ggufFilesIn(path: string): Promise<string[]> {
  return (await readdir(path)).filter((name) => /\.gguf$/i.test(name)).sort();
}

async function ggufInFolder(modelPath: string, path: string, ggufFile: string | undefined): Promise<string> {
  const ggufs = await ggufFilesIn(path);
  if (ggufFile !== undefined) {
    if (!ggufs.includes(ggufFile)) throw new InvalidArgument(`--gguf-file ${ggufFile} is not in ${path} (it has: ${ggufs.join(', ') || 'no .gguf file'})`);
    return join(path, ggufFile);
  }
  if (ggufs.length === 1) return join(path, ggufs[0]!);
  throw new InvalidArgument(
    ggufs.length === 0
      ? `--model-path ${modelPath}: ${path} holds no .gguf file`
      : `--model-path ${modelPath} holds several .gguf files (${ggufs.join(', ')}): pick one with --gguf-file`,
  );
}

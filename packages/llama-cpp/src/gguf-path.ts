import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';

import { InvalidArgument } from '@dynamo/backend';

/**
 * The `.gguf` file `modelPath` names: the file itself, or in a folder the one `ggufFile` names
 * (default: its only `.gguf`). Throws {@link InvalidArgument} saying what is missing.
 */
export async function resolveGguf(modelPath: string, ggufFile?: string): Promise<string> {
  const path = resolve(modelPath);
  const info = await stat(path).catch(() => undefined);
  if (info === undefined) {
    throw new InvalidArgument(`--model-path ${modelPath}: no such file or folder (dynamo-llama-cpp loads a local .gguf file, or one inside a local folder)`);
  }
  if (info.isFile()) {
    if (ggufFile !== undefined) throw new InvalidArgument(`--gguf-file picks a file inside a folder, but --model-path ${modelPath} is a file`);
    return path;
  }
  const ggufs = (await readdir(path)).filter((name) => /\.gguf$/i.test(name)).sort();
  if (ggufFile !== undefined) {
    if (!ggufs.includes(ggufFile)) throw new InvalidArgument(`--gguf-file ${ggufFile} is not in ${path} (it has: ${ggufs.join(', ') || 'no .gguf file'})`);
    return join(path, ggufFile);
  }
  if (ggufs.length === 1) return join(path, ggufs[0]!);
  throw new InvalidArgument(ggufs.length === 0 ? `--model-path ${modelPath}: ${path} holds no .gguf file` : `--model-path ${modelPath} holds several .gguf files (${ggufs.join(', ')}): pick one with --gguf-file`);
}

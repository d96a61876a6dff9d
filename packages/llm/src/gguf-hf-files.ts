import { randomUUID } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';

import { ggufHfFiles } from '@dynamo/core';
import { InvalidArgument } from '@dynamo/runtime';

/** The Hugging Face files written for a GGUF model, by card slot. */
export interface GgufHfPaths {
  config: string;
  tokenizer: string;
  tokenizerConfig: string;
}

/** Where they go: `$XDG_CACHE_HOME/dynamo/gguf/<checksum>` (default `~/.cache/dynamo/gguf/...`). */
export function ggufHfDir(checksum: string, env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'dynamo', 'gguf', checksum);
}

/**
 * Writes `config.json`, `tokenizer.json` and `tokenizer_config.json` describing the GGUF file at
 * `path` into {@link ggufHfDir}, so its card can name files every frontend reads: stock Dynamo
 * 1.6 rejects a card whose tokenizer is a GGUF file. They are rewritten on every call (a second
 * or two for a large vocabulary), each by rename, so concurrent workers never see half a file.
 */
export async function writeGgufHfFiles(path: string, checksum: string): Promise<GgufHfPaths> {
  let files;
  try {
    files = await ggufHfFiles(path);
  } catch (err) {
    throw new InvalidArgument((err as Error).message, { cause: err });
  }
  const dir = ggufHfDir(checksum);
  await mkdir(dir, { recursive: true });
  const put = async (name: string, text: string): Promise<string> => {
    const target = join(dir, name);
    const partial = `${target}.${randomUUID()}.partial`;
    await writeFile(partial, text);
    await rename(partial, target);
    return target;
  };
  const [config, tokenizer, tokenizerConfig] = await Promise.all([
    put('config.json', files.configJson),
    put('tokenizer.json', files.tokenizerJson),
    put('tokenizer_config.json', files.tokenizerConfigJson),
  ]);
  return { config, tokenizer, tokenizerConfig };
}

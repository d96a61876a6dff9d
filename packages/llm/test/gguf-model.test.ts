import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidArgument } from '@dynamo/runtime';
import { afterAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '../src/index.js';
import { ggufHfDir } from '../src/gguf-hf-files.js';

// Tiny GGUF files made by scripts/goldens/make-gguf-fixtures.py (Qwen3 vocabulary subset).
const fixtures = join(dirname(fileURLToPath(import.meta.url)), '../../../crates/dynamo-llm-core/tests/fixtures');
const tmp = mkdtempSync(join(tmpdir(), 'gguf-model-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
// The Hugging Face files a GGUF card names go under $XDG_CACHE_HOME/dynamo/gguf.
process.env.XDG_CACHE_HOME = join(tmp, 'cache');

/** A model directory holding only the files written for a GGUF model. */
function copyAsHfDir(from: string): string {
  const dir = mkdtempSync(join(tmp, 'hf-'));
  for (const name of ['config.json', 'tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(from, name), join(dir, name));
  return dir;
}

describe('a GGUF model', () => {
  it('gives its name, context length, chat template, EOS and tokenizer from the file', async () => {
    const path = join(tmp, 'qwen3-tiny.gguf');
    copyFileSync(join(fixtures, 'qwen3-tiny.gguf'), path);
    const model = await LocalModel.load(path);
    expect(model.source).toMatchObject({ kind: 'gguf', defaultName: 'qwen3-tiny' });
    expect(model.architecturalContextLength).toBe(40960);
    expect(await model.eosTokenIds()).toEqual([4098]);
    const card = buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat });
    // The card names Hugging Face files written from the GGUF: what stock Dynamo's frontend reads.
    const dir = ggufHfDir(model.files.gguf!.checksum);
    expect(dir).toBe(join(tmp, 'cache', 'dynamo', 'gguf', model.files.gguf!.checksum));
    expect(card).toMatchObject({
      display_name: 'qwen3-tiny',
      context_length: 40960,
      model_info: { hf_config_json: { path: join(dir, 'config.json') } },
      tokenizer: { hf_tokenizer_json: { path: join(dir, 'tokenizer.json') } },
      prompt_formatter: { hf_tokenizer_config_json: { path: join(dir, 'tokenizer_config.json') } },
    });
    expect(card.chat_template_file).toBeUndefined();
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    expect(config).toMatchObject({ model_type: 'qwen3', architectures: ['Qwen3ForCausalLM'], eos_token_id: 4098, max_position_embeddings: 40960 });
    const tokenizerConfig = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    expect(tokenizerConfig.chat_template).toBe(model.gguf!.chat_template);
    expect(tokenizerConfig.eos_token).toBe('<|im_end|>');
    const pre = await Preprocessor.create(model, card);
    const { request, prompt } = await pre.preprocessChat({ model: 'qwen3-tiny', messages: [{ role: 'user', content: 'Hello world' }] });
    expect(prompt).toBe('<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n');
    expect(request.token_ids.slice(0, 1)).toEqual([4097]);
    expect(pre.tokenizer.decode(Uint32Array.from(request.token_ids))).toBe(prompt);
    // The same model from its Hugging Face files renders and encodes the same request alike.
    const viaFiles = await LocalModel.load(copyAsHfDir(dir));
    const same = await (await Preprocessor.create(viaFiles, buildCard(viaFiles, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }))).preprocessChat({
      model: 'qwen3-tiny',
      messages: [{ role: 'user', content: 'Hello world' }],
    });
    expect(same.prompt).toBe(prompt);
    expect(same.request.token_ids).toEqual(request.token_ids);
  });

  it('names a file with a bad magic and one with truncated metadata', async () => {
    const bytes = readFileSync(join(fixtures, 'qwen3-tiny.gguf'));
    const badMagic = join(tmp, 'bad-magic.gguf');
    writeFileSync(badMagic, Buffer.concat([Buffer.from('GGUX'), bytes.subarray(4)]));
    const err = await LocalModel.load(badMagic).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toBe(`${badMagic}: not a valid GGUF file: bad magic "GGUX" (expected "GGUF")`);
    const truncated = join(tmp, 'truncated.gguf');
    writeFileSync(truncated, bytes.subarray(0, 20_000));
    await expect(LocalModel.load(truncated)).rejects.toThrow(/truncated\.gguf: not a valid GGUF file: metadata key 'tokenizer\.ggml\.tokens': .*truncated/);
  });
});

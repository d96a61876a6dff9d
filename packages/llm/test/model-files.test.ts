import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '../src/index.js';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const modelDir = () => {
  const dir = qwen3ModelDir();
  dirs.push(dir);
  return dir;
};
const chat = { model: 'm', messages: [{ role: 'user', content: 'Hi' }] };

async function preprocessor(dir: string, customTemplatePath?: string): Promise<Preprocessor> {
  const model = await LocalModel.load(dir, customTemplatePath === undefined ? {} : { customTemplatePath });
  return Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
}

describe('where the chat template comes from', () => {
  it('chat_template.jinja beats tokenizer_config.json, and a custom template beats both', async () => {
    const dir = modelDir();
    writeFileSync(join(dir, 'chat_template.jinja'), '{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}');
    const jinja = await preprocessor(dir);
    expect((await jinja.preprocessChat(chat)).prompt).toBe('[user] Hi');
    expect(jinja.card.chat_template_file).toMatchObject({ hf_chat_template: { is_custom: false, file: { path: join(dir, 'chat_template.jinja') } } });

    const custom = join(dir, 'custom.jinja');
    writeFileSync(custom, 'CUSTOM {{ messages[0].content }}{{ eos_token }}');
    const withCustom = await preprocessor(dir, custom);
    expect((await withCustom.preprocessChat(chat)).prompt).toBe('CUSTOM Hi<|im_end|>');
    expect(withCustom.card.chat_template_file).toMatchObject({ hf_chat_template: { is_custom: true, file: { path: custom } } });
  });

  it('chat_template.json is read when there is no .jinja', async () => {
    const dir = modelDir();
    writeFileSync(join(dir, 'chat_template.json'), JSON.stringify({ chat_template: 'JSON {{ messages | length }}' }));
    const pre = await preprocessor(dir);
    expect((await pre.preprocessChat(chat)).prompt).toBe('JSON 1');
    expect(Object.keys(pre.card.chat_template_file ?? {})).toEqual(['hf_chat_template_json']);
  });

  it('a template that does not compile is named, and raise_exception becomes a request error', async () => {
    const dir = modelDir();
    writeFileSync(join(dir, 'chat_template.jinja'), '{% if %}');
    await expect(preprocessor(dir)).rejects.toThrow(/chat_template\.jinja: template 'default': chat template: /);
    writeFileSync(join(dir, 'chat_template.jinja'), "{{ raise_exception('Conversation roles must alternate') }}");
    await expect((await preprocessor(dir)).preprocessChat(chat)).rejects.toThrow('request: chat template: Conversation roles must alternate');
  });

  it('a missing custom template is named', async () => {
    await expect(LocalModel.load(modelDir(), { customTemplatePath: '/nonexistent/t.jinja' })).rejects.toThrow(
      'customTemplatePath: /nonexistent/t.jinja does not exist',
    );
  });
});

describe('the tokenizer', () => {
  it('encodes with and without special tokens, in batches, and decodes skipping specials or not', async () => {
    const gguf = join(dirname(fileURLToPath(import.meta.url)), '../../../crates/dynamo-llm-core/tests/fixtures/llama-tiny.gguf');
    const dir = mkdtempSync(join(tmpdir(), 'llama-'));
    dirs.push(dir);
    copyFileSync(gguf, join(dir, 'llama.gguf'));
    const tok = await (await LocalModel.load(join(dir, 'llama.gguf'))).tokenizer();
    expect(Array.from(tok.encodeSync('Hello world', true))).toEqual([1, 382, 4508, 1526]);
    expect(Array.from(await tok.encode('Hello world', false))).toEqual([382, 4508, 1526]);
    const batch = await tok.encodeBatch(['Hello world', 'Hello, world! How are you today?'], false);
    expect(batch.map((ids) => Array.from(ids))).toEqual([[382, 4508, 1526], Array.from(tok.encodeSync('Hello, world! How are you today?', false))]);
    expect(tok.decode(Uint32Array.of(1, 382, 4508, 1526), false)).toBe('<s> Hello world');
    expect(tok.decode(Uint32Array.of(1, 382, 4508, 1526), true)).toBe('Hello world');
    expect(tok.tokenToId('<s>')).toBe(1);
    expect(tok.idToToken(2)).toBe('</s>');
  });

  it('registers the special tokens of tokenizer_config.json so they match whole', async () => {
    const tok = await (await LocalModel.load(modelDir())).tokenizer();
    expect(Array.from(tok.encodeSync('<|im_start|>user', false))).toEqual([151644, 872]);
    expect(tok.decode(Uint32Array.of(151644, 872), true)).toBe('user');
  });

  it('is loaded once for models whose tokenizer files are the same, and apart when they differ', async () => {
    const [a, b, c] = [modelDir(), modelDir(), modelDir()];
    const config = JSON.parse(readFileSync(join(c, 'tokenizer_config.json'), 'utf8')) as { added_tokens_decoder: Record<string, { content: string }> };
    config.added_tokens_decoder['151644']!.content = '<|start|>';
    writeFileSync(join(c, 'tokenizer_config.json'), JSON.stringify(config));
    const [ta, tb, tc] = await Promise.all([a, b, c].map(async (dir) => (await LocalModel.load(dir)).tokenizer()));
    expect(tb).toBe(ta);
    expect(tc).not.toBe(ta);
    expect(ta!.tokenToId('<|start|>')).toBeNull();
    expect(tc!.tokenToId('<|start|>')).toEqual(expect.any(Number));
    // Loaded after the first load finished, too.
    expect(await (await LocalModel.load(b)).tokenizer()).toBe(ta);
  });
});

import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '../src/index.js';
import { qwen3ModelDir } from './helpers/qwen3.js';

// Made by scripts/goldens/make-chat-goldens.py with Python transformers' apply_chat_template.
const fixtures = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
const conversations = JSON.parse(readFileSync(join(fixtures, 'chat-conversations.json'), 'utf8')) as Array<{ name: string; body: Record<string, unknown> }>;
const goldens = JSON.parse(readFileSync(join(fixtures, 'qwen3-chat-goldens.json'), 'utf8')).goldens as Array<{ name: string; prompt?: string; token_ids?: number[]; error?: string }>;

let dir: string;
let pre: Preprocessor;

beforeAll(async () => {
  dir = qwen3ModelDir();
  const model = await LocalModel.load(dir);
  pre = await Preprocessor.create(model, buildCard(model, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat, modelName: 'qwen3' }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('Qwen3 chat template goldens (transformers apply_chat_template)', () => {
  it('covers at least 30 conversations', () => {
    expect(goldens.filter((g) => g.prompt !== undefined).length).toBeGreaterThanOrEqual(30);
    expect(goldens.map((g) => g.name)).toEqual(conversations.map((c) => c.name));
  });

  it.each(conversations.map((c, i) => [c.name, c, goldens[i]!] as const))('%s', async (_name, conversation, golden) => {
    if (golden.error !== undefined) {
      await expect(pre.preprocessChat(conversation.body)).rejects.toThrow();
      return;
    }
    const { request, prompt } = await pre.preprocessChat(conversation.body);
    expect(prompt).toBe(golden.prompt);
    expect(request.token_ids).toEqual(golden.token_ids);
  });
});

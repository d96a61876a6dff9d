import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '../src/index.js';
import { type ChatGolden, chatGoldenTests } from '@dynamo/testing/chat-goldens';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

// Made by scripts/goldens/make-chat-goldens.py with Python transformers' apply_chat_template.
const fixtures = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
const goldens = JSON.parse(readFileSync(join(fixtures, 'qwen3-chat-goldens.json'), 'utf8')).goldens as ChatGolden[];

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
  });

  chatGoldenTests(
    goldens,
    () => pre,
    (golden) => golden.token_ids!,
  );
});

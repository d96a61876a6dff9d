// Our tokenizer and chat template, built from the GGUF alone, against the references: llama.cpp's
// own tokenizer (model.tokenize / detokenize) on a corpus of 300+ strings, and Python
// transformers' Jinja renderer on the chat template (goldens made by
// scripts/goldens/make-gguf-chat-goldens.py from packages/llm's conversations).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { getLlama, type Llama, type LlamaModel } from 'node-llama-cpp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { type ChatGolden, chatGoldenTests } from '@dynamo/testing/chat-goldens';
import { smolLm2 } from '../../../scripts/test-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const readJson = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));
const corpus = Object.entries((readJson(join(here, 'fixtures', 'tokenizer-corpus.json')) as { corpus: Record<string, string[]> }).corpus).flatMap(
  ([category, texts]) => texts.map((text) => ({ category, text })),
);
const goldens = (readJson(join(here, 'fixtures', 'smollm2-chat-goldens.json')) as { goldens: ChatGolden[] }).goldens;
const modelPath = await smolLm2();

let llama: Llama;
let model: LlamaModel;
let pre: Preprocessor;

beforeAll(async () => {
  llama = await getLlama({ gpu: false, build: 'never' });
  model = await llama.loadModel({ modelPath, vocabOnly: true });
  const local = await LocalModel.load(modelPath);
  pre = await Preprocessor.create(local, buildCard(local, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
}, 60_000);
afterAll(async () => {
  await model?.dispose();
  await llama?.dispose();
});

describe('tokenizer parity with llama.cpp on SmolLM2', () => {
  it('has a corpus of at least 300 strings across English, CJK, code, emoji, whitespace and special tokens', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(300);
    expect(new Set(corpus.map((c) => c.category))).toEqual(
      new Set(['english', 'cjk', 'other_scripts', 'code', 'emoji', 'special_tokens', 'numbers', 'whitespace', 'repetition', 'mixed']),
    );
  });

  it('gives the ids llama.cpp gives for every string (special tokens parsed, as a rendered prompt has them), and both decode them back to the string', async () => {
    const ours = await pre.tokenizer.encodeBatch(
      corpus.map((c) => c.text),
      false,
    );
    const mismatches: string[] = [];
    for (const [i, { category, text }] of corpus.entries()) {
      const ids = [...ours[i]!];
      const theirs = [...model.tokenize(text, true)];
      if (JSON.stringify(ids) !== JSON.stringify(theirs))
        mismatches.push(`${category} ${JSON.stringify(text)}: ours ${JSON.stringify(ids)}, llama.cpp ${JSON.stringify(theirs)}`);
      else if (pre.tokenizer.decode(Uint32Array.from(ids), false) !== text)
        mismatches.push(`${category} ${JSON.stringify(text)}: ours decodes to ${JSON.stringify(pre.tokenizer.decode(Uint32Array.from(ids), false))}`);
      else if (model.detokenize(theirs, true) !== text)
        mismatches.push(`${category} ${JSON.stringify(text)}: llama.cpp decodes to ${JSON.stringify(model.detokenize(theirs, true))}`);
    }
    expect(mismatches).toEqual([]);
  });
});

describe('SmolLM2 chat template goldens (transformers render_jinja_template)', () => {
  // The ids of each prompt are llama.cpp's own tokenization of it.
  chatGoldenTests(
    goldens,
    () => pre,
    (golden) => [...model.tokenize(golden.prompt!, true)],
  );
});

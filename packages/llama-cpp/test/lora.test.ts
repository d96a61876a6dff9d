// Real LoRA adapters on SmolLM2-135M: made at setup by fixtures/make-lora.py with the PyPI gguf
// package (from the cached stock Dynamo venv), loaded into llama.cpp, served by name beside the
// base model. Skipped, never passed, when that venv cannot be built (PyPI unreachable).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { Context, type GenerateChunk, type GenerateRequest, InvalidArgument } from '@dynamo/backend';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { smolLm2 } from '../../../scripts/test-model.mjs';
import { LlamaCppEngine } from '../src/index.js';

const modelPath = await smolLm2();
const stock = stockPython();
if ('skip' in stock) console.warn(`\n*** LLAMA-CPP LORA TESTS SKIPPED: ${stock.skip} ***\n`);
const makeLora = fileURLToPath(new URL('fixtures/make-lora.py', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'llama-cpp-lora-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function collect(stream: AsyncIterable<GenerateChunk>): Promise<GenerateChunk[]> {
  const chunks: GenerateChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const tokensOf = (chunks: GenerateChunk[]) => chunks.flatMap((c) => c.token_ids ?? []);

describe.skipIf('skip' in stock)('LoRA adapters of LlamaCppEngine on SmolLM2-135M', () => {
  const engine = new LlamaCppEngine({ modelPath, parallel: 2, contextSize: 512 });
  const folder = join(tmp, 'pirate');
  const adapter = join(folder, 'adapter.gguf');
  const misfit = join(tmp, 'misfit.gguf');
  let pre: Preprocessor;
  let prompt: number[];
  /** The base model's greedy answer, before any adapter was loaded. */
  let baseline: number[];

  beforeAll(async () => {
    mkdirSync(folder);
    // An adapter for SmolLM2, and one whose shapes fit another model.
    execFileSync((stock as { python: string }).python, [makeLora, modelPath, adapter, '--misfit', misfit], { stdio: 'pipe' });
    await engine.start(1n);
    const local = await LocalModel.load(modelPath);
    pre = await Preprocessor.create(local, buildCard(local, { modelInput: ModelInput.Tokens, modelType: ModelType.Chat }));
    const { request } = await pre.preprocessChat({ model: engine.modelName, messages: [{ role: 'user', content: 'What is the capital of France?' }] });
    prompt = request.token_ids;
    baseline = await answer(engine.modelName);
  }, 120_000);
  afterAll(() => engine.cleanup());

  /** Eight greedy tokens for the prompt, by the model or adapter `model` names (none: the base). */
  async function answer(model?: string, extra: Partial<GenerateRequest> = {}): Promise<number[]> {
    const request = {
      token_ids: prompt,
      ...(model !== undefined && { model }),
      sampling_options: { temperature: 0 },
      stop_conditions: { max_tokens: 8 },
      ...extra,
    };
    return tokensOf(await collect(engine.generate(request, new Context())));
  }
  const text = (ids: number[]) => pre.tokenizer.decode(Uint32Array.from(ids), true);

  /** The error loadLora() refuses `uri` with (it must refuse with an InvalidArgument). */
  async function refusal(uri: string, name = 'bad'): Promise<string> {
    const err = await engine.loadLora(name, { uri }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err, uri).toBeInstanceOf(InvalidArgument);
    return (err as Error).message;
  }

  it('answers by an adapter loaded from a file:// URI differently from the base model, the same on every run, and leaves the base answer as it was', async () => {
    await engine.loadLora('pirate', { uri: pathToFileURL(adapter).href });
    const adapted = await answer('pirate');
    expect(text(adapted)).not.toBe(text(baseline));
    expect(await answer('pirate')).toEqual(adapted);
    // Stock Dynamo's frontend also names the adapter in routing.lora_name, which wins over model.
    expect(await answer(engine.modelName, { routing: { lora_name: 'pirate' } })).toEqual(adapted);
    const [base, lora] = await Promise.all([answer(engine.modelName), answer('pirate')]);
    expect(base).toEqual(baseline);
    expect(lora).toEqual(adapted);
    expect(await answer()).toEqual(baseline);
    await engine.unloadLora('pirate');
  }, 60_000);

  it('loads the one .gguf of a folder given as a plain path, and a second name of the same file; a name again from the same file is a no-op, from another refused', async () => {
    await engine.loadLora('by-folder', { uri: folder });
    await engine.loadLora('by-file', { uri: adapter });
    const byFolder = await answer('by-folder');
    expect(byFolder).not.toEqual(baseline);
    expect(await answer('by-file')).toEqual(byFolder);
    await engine.loadLora('by-file', { uri: pathToFileURL(adapter).href });
    expect(await refusal(misfit, 'by-file')).toBe(`LoRA adapter 'by-file' is already loaded from ${adapter}; unload it before loading ${misfit}`);
    // The other name keeps the weights both share.
    await engine.unloadLora('by-folder');
    expect(await answer('by-file')).toEqual(byFolder);
    await engine.unloadLora('by-file');
  }, 60_000);

  it('unloads once the requests on the adapter finished, refusing new ones by its name from the call on; unloading again does nothing', async () => {
    await engine.loadLora('brief', { uri: adapter });
    const running = engine
      .generate({ token_ids: prompt, model: 'brief', sampling_options: { temperature: 0 }, stop_conditions: { max_tokens: 6 } }, new Context())
      [Symbol.asyncIterator]();
    const first = await running.next();
    let unloaded = false;
    const unloading = engine.unloadLora('brief').then(() => {
      unloaded = true;
    });
    await expect(answer('brief')).rejects.toThrow(new InvalidArgument("unknown model or LoRA adapter: 'brief'"));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(unloaded).toBe(false);
    const rest: GenerateChunk[] = [];
    for (let next = await running.next(); !next.done; next = await running.next()) rest.push(next.value);
    expect(tokensOf([first.value as GenerateChunk, ...rest])).toHaveLength(6);
    expect(rest.at(-1)?.finish_reason ?? (first.value as GenerateChunk).finish_reason).toBe('length');
    await unloading;
    expect(unloaded).toBe(true);
    await engine.unloadLora('brief');
    expect(engine.load()).toEqual({ queued: 0, active: 0 });
    expect(await answer()).toEqual(baseline);
  }, 60_000);

  it("refuses routing.lora_name naming no loaded adapter with vLLM's wording; any other model name is the base model's", async () => {
    await expect(answer(engine.modelName, { routing: { lora_name: 'nobody' } })).rejects.toThrow(
      new InvalidArgument("unknown model or LoRA adapter: 'nobody'"),
    );
    expect(await answer('another-name-for-the-model')).toEqual(baseline);
  });

  it('refuses bad sources naming the file and what is wrong, and serves on: base and adapter answers as before', async () => {
    const missing = join(tmp, 'missing.gguf');
    const garbage = join(tmp, 'garbage.gguf');
    writeFileSync(garbage, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 37) % 251)));
    const empty = join(tmp, 'empty');
    mkdirSync(empty);
    expect(await refusal('s3://bucket/adapter.gguf')).toBe(
      'LoRA source s3://bucket/adapter.gguf: the s3:// scheme is not supported; dynamo-llama-cpp loads adapters from file:// URIs or absolute paths',
    );
    expect(await refusal('adapters/pirate.gguf')).toBe('LoRA source adapters/pirate.gguf: not a file:// URI or an absolute path');
    expect(await refusal(missing)).toBe(`LoRA source ${missing}: no such file or folder`);
    expect(await refusal(empty)).toBe(`LoRA source ${empty}: the folder holds no .gguf file`);
    expect(await refusal(modelPath)).toBe(`LoRA adapter ${modelPath}: general.type is "model", not "adapter": this is a model, not a LoRA adapter`);
    expect(await refusal(garbage)).toMatch(new RegExp(`^LoRA adapter ${garbage}: not a readable GGUF file \\(Invalid GGUF magic`));
    expect(await refusal(misfit)).toBe(
      `LoRA adapter ${misfit}: blk.0.attn_q.weight: lora_a [577, 8] and lora_b [8, 576] do not fit the base model's [576, 576] (an adapter for another model?)`,
    );
    expect(await refusal(adapter, engine.modelName)).toBe(`LoRA adapter name '${engine.modelName}' is the base model's; pick another`);

    await expect(answer(engine.modelName, { routing: { lora_name: 'bad' } })).rejects.toThrow("unknown model or LoRA adapter: 'bad'");
    expect(await answer(engine.modelName)).toEqual(baseline);
    await engine.loadLora('after', { uri: adapter });
    expect(await answer('after')).not.toEqual(baseline);
    await engine.unloadLora('after');
  }, 60_000);
});

import { constants } from 'node:fs';
import { access, readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';

import {
  type ChatTemplateSources,
  fileChecksumBlake3,
  loadGgufTokenizer,
  loadTokenizer,
  PromptFormatter,
  readGgufMetadataJson,
  type Tokenizer,
} from '@dynamo/core';
import { InvalidArgument } from '@dynamo/runtime';

import { writeGgufHfFiles } from './gguf-hf-files.js';
import { type ResolvedModelPath, type ResolveOptions, resolveModelPath } from './model-path/index.js';
import { sharedTokenizer } from './shared-tokenizers.js';

/** The model files a card can refer to, by their card slot. */
export type FileSlot = 'config' | 'tokenizer' | 'tokenizerConfig' | 'chatTemplateJinja' | 'chatTemplateJson' | 'generationConfig' | 'customTemplate' | 'gguf';

const FILE_NAMES: Record<Exclude<FileSlot, 'customTemplate' | 'gguf'>, string> = {
  config: 'config.json',
  tokenizer: 'tokenizer.json',
  tokenizerConfig: 'tokenizer_config.json',
  chatTemplateJinja: 'chat_template.jinja',
  chatTemplateJson: 'chat_template.json',
  generationConfig: 'generation_config.json',
};

/** A model file on disk with its card checksum. */
export interface ModelFile {
  path: string;
  name: string;
  checksum: string;
  size: number;
}

/** What a GGUF file's header says about the model. */
export interface GgufSummary {
  version: number;
  architecture: string | null;
  context_length: number | null;
  chat_template: string | null;
  bos_token_id: number | null;
  eos_token_id: number | null;
  name: string | null;
  metadata: Record<string, unknown>;
}

type Json = Record<string, unknown>;

/** Options for {@link LocalModel.load}. */
export interface LoadModelOptions extends ResolveOptions {
  /** A Jinja file that replaces the model's chat template. */
  customTemplatePath?: string;
}

/**
 * A model's files, read and checked: a Hugging Face directory (`config.json`, `tokenizer.json`,
 * `tokenizer_config.json`, optional chat template and generation config) or a GGUF file.
 * Everything a card and a preprocessor need comes from here.
 */
export class LocalModel {
  readonly source: ResolvedModelPath;
  readonly files: Partial<Record<FileSlot, ModelFile>>;
  /** `config.json`, parsed. */
  readonly config: Json | undefined;
  /** `tokenizer_config.json`, parsed. */
  readonly tokenizerConfig: Json | undefined;
  /** `generation_config.json`, parsed. */
  readonly generationConfig: Json | undefined;
  /** The GGUF header, for a GGUF model. */
  readonly gguf: GgufSummary | undefined;
  readonly #texts: Partial<Record<FileSlot, string>>;
  #tokenizer: Promise<Tokenizer> | undefined;

  private constructor(init: {
    source: ResolvedModelPath;
    files: Partial<Record<FileSlot, ModelFile>>;
    texts: Partial<Record<FileSlot, string>>;
    gguf?: GgufSummary;
  }) {
    this.source = init.source;
    this.files = init.files;
    this.#texts = init.texts;
    this.gguf = init.gguf;
    this.config = parseJsonFile(init.files.config, init.texts.config);
    this.tokenizerConfig = parseJsonFile(init.files.tokenizerConfig, init.texts.tokenizerConfig);
    this.generationConfig = parseJsonFile(init.files.generationConfig, init.texts.generationConfig);
    parseJsonFile(init.files.chatTemplateJson, init.texts.chatTemplateJson);
  }

  /**
   * Resolves `modelPath` (a directory, a `.gguf` file, or a Hugging Face repo id) and reads
   * its files. Throws {@link InvalidArgument} naming a missing or malformed file.
   */
  static async load(modelPath: string, options: LoadModelOptions = {}): Promise<LocalModel> {
    const source = await resolveModelPath(modelPath, options);
    const files: Partial<Record<FileSlot, ModelFile>> = {};
    const texts: Partial<Record<FileSlot, string>> = {};
    let gguf: GgufSummary | undefined;
    if (source.kind === 'gguf') {
      files.gguf = await checkedFile(source.path);
      gguf = await readGguf(source.path);
      // The card names these, so frontends that read only Hugging Face files serve the model too.
      const written = await writeGgufHfFiles(source.path, files.gguf.checksum);
      for (const slot of ['config', 'tokenizer', 'tokenizerConfig'] as const) {
        if (slot !== 'tokenizer') texts[slot] = await readFile(written[slot], 'utf8');
        files[slot] = await checkedFile(written[slot]);
      }
    } else {
      for (const [slot, name] of Object.entries(FILE_NAMES) as Array<[keyof typeof FILE_NAMES, string]>) {
        const path = join(source.path, name);
        if (slot === 'tokenizer') {
          if (!(await present(path))) continue;
        } else {
          const text = await readOptional(path);
          if (text === undefined) continue;
          texts[slot] = text;
        }
        files[slot] = await checkedFile(path);
      }
      for (const required of ['config', 'tokenizer'] as const) {
        if (!files[required]) throw new InvalidArgument(`model ${modelPath}: ${FILE_NAMES[required]} is missing in ${source.path}`);
      }
    }
    if (options.customTemplatePath !== undefined) {
      const text = await readOptional(options.customTemplatePath);
      if (text === undefined) throw new InvalidArgument(`customTemplatePath: ${options.customTemplatePath} does not exist`);
      texts.customTemplate = text;
      files.customTemplate = await checkedFile(options.customTemplatePath);
    }
    return new LocalModel({ source, files, texts, ...(gguf ? { gguf } : {}) });
  }

  /** The longest context the model was built for (`max_position_embeddings` and kin). */
  get architecturalContextLength(): number | undefined {
    if (this.gguf) return this.gguf.context_length ?? undefined;
    const config = this.config ?? {};
    const text = (config.text_config ?? {}) as Json;
    for (const value of [
      config.max_position_embeddings,
      text.max_position_embeddings,
      config.max_sequence_length,
      config.seq_length,
      this.tokenizerConfig?.model_max_length,
    ]) {
      if (typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 2 ** 32) return value;
    }
    return undefined;
  }

  /**
   * The model's EOS token ids: `generation_config.json`, else `config.json` (or its
   * `text_config`), plus the tokenizer config's `eos_token` when it names another token.
   */
  async eosTokenIds(): Promise<number[]> {
    if (this.gguf) return this.gguf.eos_token_id === null ? [] : [this.gguf.eos_token_id];
    const ids: number[] = [];
    const text = (this.config?.text_config ?? {}) as Json;
    for (const value of [this.generationConfig?.eos_token_id, this.config?.eos_token_id, text.eos_token_id]) {
      const found = tokenIds(value);
      if (found.length > 0) {
        ids.push(...found);
        break;
      }
    }
    const eosToken = specialTokenText(this.tokenizerConfig?.eos_token);
    if (eosToken !== undefined) {
      const id = (await this.tokenizer()).tokenToId(eosToken);
      if (id !== null && id !== undefined && !ids.includes(id)) ids.push(id);
    }
    return ids;
  }

  /** Where the chat template comes from (the first present wins: custom, jinja, json, tokenizer config). */
  templateSources(): ChatTemplateSources {
    if (this.gguf) return { custom: this.#texts.customTemplate ?? this.gguf.chat_template ?? undefined };
    return {
      custom: this.#texts.customTemplate,
      chatTemplateJinja: this.#texts.chatTemplateJinja,
      chatTemplateJson: this.#texts.chatTemplateJson,
      tokenizerConfig: this.#texts.tokenizerConfig,
    };
  }

  /** The model's chat template, compiled. Throws naming the template's file when it is broken. */
  promptFormatter(options: { excludeToolsWhenToolChoiceNone?: boolean } = {}): PromptFormatter {
    try {
      return new PromptFormatter(this.templateSources(), { excludeToolsWhenToolChoiceNone: options.excludeToolsWhenToolChoiceNone ?? true });
    } catch (err) {
      throw new InvalidArgument(`model ${this.source.path}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The model's tokenizer, loaded once off the JS thread and shared with models whose tokenizer files are the same. */
  tokenizer(): Promise<Tokenizer> {
    const { gguf, tokenizer, tokenizerConfig } = this.files;
    this.#tokenizer ??= (
      gguf
        ? sharedTokenizer(`gguf ${gguf.checksum}`, () => loadGgufTokenizer(this.source.path))
        : sharedTokenizer(`hf ${tokenizer!.checksum} ${tokenizerConfig?.checksum ?? '-'}`, () => loadTokenizer(tokenizer!.path, tokenizerConfig?.path))
    ).catch((err: unknown) => {
      this.#tokenizer = undefined;
      throw new InvalidArgument((err as Error).message, { cause: err });
    });
    return this.#tokenizer;
  }
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new InvalidArgument(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** Whether a file exists. */
async function present(path: string): Promise<boolean> {
  try {
    await access(path, constants.R_OK);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw new InvalidArgument(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

async function checkedFile(path: string): Promise<ModelFile> {
  const [checksum, info] = await Promise.all([fileChecksumBlake3(path), stat(path)]);
  return { path, name: basename(path), checksum, size: info.size };
}

async function readGguf(path: string): Promise<GgufSummary> {
  try {
    return JSON.parse(await readGgufMetadataJson(path)) as GgufSummary;
  } catch (err) {
    throw new InvalidArgument((err as Error).message, { cause: err });
  }
}

function parseJsonFile(file: ModelFile | undefined, text: string | undefined): Json | undefined {
  if (!file || text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InvalidArgument(`${file.path} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new InvalidArgument(`${file.path} must hold a JSON object`);
  return value as Json;
}

function tokenIds(value: unknown): number[] {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return [value];
  if (Array.isArray(value)) return value.filter((v): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0);
  return [];
}

/** A special token in `tokenizer_config.json`: a string or an AddedToken object. */
export function specialTokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && typeof (value as { content?: unknown }).content === 'string')
    return (value as { content: string }).content;
  return undefined;
}

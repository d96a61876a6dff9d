import { access } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CheckedFile, type FileSlot, LocalModel, type ModelDeploymentCard, resolveModelPath } from '@dynamo/llm';
import { InvalidArgument } from '@dynamo/runtime';

import { defaultCardCache, downloadCardFiles, isHttpCardFile } from './card-downloads.js';

/** Where a frontend finds the files a card points at. */
export interface CardFilesOptions {
  /** A local model directory (or `.gguf`) used when the card's own paths cannot be read. */
  fallbackModelPath?: string;
  /** Environment for Hugging Face settings (`HF_HOME`, `HF_HUB_OFFLINE`, `HF_TOKEN`, ...). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where http(s) card files are downloaded to (default `~/.cache/dynamo/mdc`, as stock's frontend). */
  cacheDir?: string;
}

/** The card's files by the slot `LocalModel` keeps them under. */
function cardFiles(card: ModelDeploymentCard): Array<[FileSlot, CheckedFile]> {
  const files: Array<[FileSlot, CheckedFile | undefined]> = [
    ['config', card.model_info?.hf_config_json],
    ['tokenizerConfig', card.prompt_formatter?.hf_tokenizer_config_json],
    ['generationConfig', card.gen_config?.hf_generation_config_json],
  ];
  // The slots are unions of single-key objects; read them by key.
  type Template = { is_custom: boolean; file: CheckedFile };
  const tokenizer = (card.tokenizer ?? {}) as { hf_tokenizer_json?: CheckedFile; gguf?: CheckedFile };
  const template = (card.chat_template_file ?? {}) as { hf_chat_template?: Template; hf_chat_template_json?: Template };
  files.push(['tokenizer', tokenizer.hf_tokenizer_json], ['gguf', tokenizer.gguf], ['chatTemplateJson', template.hf_chat_template_json?.file]);
  if (template.hf_chat_template) files.push([template.hf_chat_template.is_custom ? 'customTemplate' : 'chatTemplateJinja', template.hf_chat_template.file]);
  return files.filter((f): f is [FileSlot, CheckedFile] => f[1] !== undefined);
}

/**
 * Where a card file is on this machine: an absolute path or `file://` URL as is,
 * `hf://{org}/{name}/{file}` in the Hugging Face cache (downloaded when missing). http(s) files
 * are downloaded beforehand ({@link downloadCardFiles}).
 */
async function localFile(path: string, options: CardFilesOptions): Promise<string> {
  let local: string;
  if (path.startsWith('hf://')) {
    const [org, name, ...file] = path.slice('hf://'.length).split('/');
    if (!org || !name || file.length === 0) throw new InvalidArgument(`card file ${path}: expected hf://{org}/{name}/{file}`);
    const resolved = await resolveModelPath(`hf://${org}/${name}`, options.env === undefined ? {} : { env: options.env });
    local = join(resolved.path, ...file);
  } else {
    local = path.startsWith('file://') ? fileURLToPath(path) : path;
    if (!isAbsolute(local)) throw new InvalidArgument(`card file ${path}: expected an absolute path, or a file://, hf:// or http(s):// URL`);
  }
  await access(local);
  return local;
}

/**
 * Reads the model files a card names, from wherever the card says they are, and checks each
 * against the card's checksum, so the frontend tokenizes exactly as the worker that registered it
 * expects. Loads are shared: cards naming the same files get the same {@link LocalModel}.
 */
export class CardFiles {
  readonly #options: CardFilesOptions;
  readonly #loaded = new Map<string, Promise<LocalModel>>();

  constructor(options: CardFilesOptions = {}) {
    this.#options = options;
  }

  /** The model behind `card`. Throws `InvalidArgument` naming the file that is missing or differs. */
  async load(card: ModelDeploymentCard): Promise<LocalModel> {
    const files = await this.#downloaded(card, cardFiles(card));
    const tokenizer = files.find(([slot]) => slot === 'tokenizer' || slot === 'gguf');
    if (!tokenizer)
      throw new InvalidArgument(`model ${card.display_name}: its card names no tokenizer (hf_tokenizer_json or gguf), which a Tokens-input model needs`);
    let source: string;
    try {
      const file = await localFile(tokenizer[1].path, this.#options);
      source = tokenizer[0] === 'gguf' ? file : dirname(file);
    } catch (err) {
      if (this.#options.fallbackModelPath === undefined) {
        throw new InvalidArgument(
          `model ${card.display_name}: cannot read its tokenizer at ${tokenizer[1].path} (${(err as Error).message}); run the frontend where the worker's model files are readable, or pass --model-path`,
          { cause: err },
        );
      }
      source = this.#options.fallbackModelPath;
    }
    const custom = files.find(([slot]) => slot === 'customTemplate')?.[1];
    const customPath = custom === undefined ? undefined : await localFile(custom.path, this.#options);
    const key = `${source}\0${customPath ?? ''}`;
    let loading = this.#loaded.get(key);
    if (!loading) {
      loading = LocalModel.load(source, {
        ...(customPath === undefined ? {} : { customTemplatePath: customPath }),
        ...(this.#options.env === undefined ? {} : { env: this.#options.env }),
      });
      this.#loaded.set(key, loading);
      loading.catch(() => this.#loaded.delete(key));
    }
    const model = await loading;
    for (const [slot, file] of files) {
      const found = model.files[slot];
      if (found === undefined) throw new InvalidArgument(`model ${card.display_name}: ${file.path} is not in ${source}`);
      if (found.checksum !== file.checksum) {
        throw new InvalidArgument(
          `model ${card.display_name}: ${found.path} has checksum ${found.checksum} but the card says ${file.checksum} (the worker's model files differ from this frontend's)`,
        );
      }
    }
    return model;
  }

  /** `files` with the http(s) ones downloaded and pointing at their local copies. */
  async #downloaded(card: ModelDeploymentCard, files: Array<[FileSlot, CheckedFile]>): Promise<Array<[FileSlot, CheckedFile]>> {
    const remote = files.filter(([, file]) => isHttpCardFile(file)).map(([, file]) => file);
    if (remote.length === 0) return files;
    let local: Map<string, string>;
    try {
      local = await downloadCardFiles(card, remote, this.#options.cacheDir ?? defaultCardCache(this.#options.env));
    } catch (err) {
      // With --model-path the files are read from there instead; without it, say which file failed.
      if (this.#options.fallbackModelPath !== undefined) return files;
      throw new InvalidArgument(
        `model ${card.display_name}: ${(err as Error).message}; pass --model-path to read the model files from a local folder instead`,
        { cause: err },
      );
    }
    return files.map(([slot, file]) => [slot, { ...file, path: local.get(file.path) ?? file.path }]);
  }
}

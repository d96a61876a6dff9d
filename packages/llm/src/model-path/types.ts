import type { Log } from '@dynamo/runtime';
import type { ProgressMode } from './progress.js';

/** Where a model's files are on local disk, once {@link resolveModelPath} is done. */
export interface ResolvedModelPath {
  /** `dir`: a folder with `config.json` and tokenizer files; `gguf`: a single GGUF file. */
  kind: 'dir' | 'gguf';
  /** Absolute local directory (kind `dir`) or `.gguf` file (kind `gguf`). */
  path: string;
  /** Set when the model came from the Hugging Face Hub (cache or download): `Org/Name`. */
  repoId?: string;
  /** The commit hash of the Hub snapshot, when known. */
  revision?: string;
  /**
   * Default public model name: the HF repo id `Org/Name`, else the folder name, else the GGUF file
   * name without extension.
   */
  defaultName: string;
}

/** Options for {@link resolveModelPath}; every one is optional. */
export interface ResolveOptions {
  /**
   * Where the Hugging Face variables are read from (default `process.env`): `HF_HOME`,
   * `HF_HUB_CACHE`, `HF_ENDPOINT`, `HF_TOKEN`, `HF_TOKEN_PATH`, `HF_HUB_OFFLINE`,
   * `HF_HUB_DISABLE_PROGRESS_BARS`, `HF_HUB_ETAG_TIMEOUT`, `HF_HUB_DOWNLOAD_TIMEOUT`, `XDG_CACHE_HOME`, `HOME`.
   */
  env?: Readonly<Record<string, string | undefined>>;
  /** Hub revision (branch, tag or commit hash); default `main`. `Org/Name@rev` says the same. */
  revision?: string;
  /**
   * For a Hub repo of GGUF files (which have no `config.json`): the one `.gguf` file to take,
   * downloaded alone into the cache; the result is that file (`kind: 'gguf'`). Without it, a repo
   * with no `config.json` but exactly one `.gguf` file gives that file.
   */
  ggufFile?: string;
  /**
   * Default true: download only the files a model card needs (config, tokenizer, chat template,
   * generation config). False also downloads the weights.
   */
  ignoreWeights?: boolean;
  /**
   * How downloads are shown: `bar` (a progress bar per file on stderr), `log` (info lines through
   * `log`), `none` (nothing at all). Default `auto`: a bar on a TTY stderr, log lines otherwise.
   */
  progress?: ProgressMode;
  /** Where log lines go; pino's `Logger` fits. Default: the runtime's logging on stderr. */
  log?: Log;
  /** Aborts lookups and downloads; partial files stay and a later call resumes them. */
  signal?: AbortSignal;
  /** The `fetch` to use (default the global one). */
  fetch?: typeof fetch;
}

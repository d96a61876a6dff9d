import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { z } from 'zod';
import { InvalidArgument } from '@dynamo/runtime';
import { describeIssues, envFlag as flag } from '@dynamo/runtime/internal';

const seconds = z.coerce.number().positive().finite();

/**
 * The Hugging Face Hub settings, keyed by the environment variables `huggingface_hub` and the Rust
 * `hf-hub` crate read. Defaults live here and only here.
 */
const hfEnvSchema = z.object({
  HOME: z.string().optional(),
  XDG_CACHE_HOME: z.string().optional(),
  /** Root of everything Hugging Face keeps locally; default `$XDG_CACHE_HOME/huggingface` or `~/.cache/huggingface`. */
  HF_HOME: z.string().optional(),
  /** Where repos are cached; default `$HF_HOME/hub`. */
  HF_HUB_CACHE: z.string().optional(),
  /** The legacy name of `HF_HUB_CACHE`, still read by `huggingface_hub`. */
  HUGGINGFACE_HUB_CACHE: z.string().optional(),
  HF_ENDPOINT: z
    .url({ protocol: /^https?$/, message: 'must be an http:// or https:// URL' })
    .transform((u) => u.replace(/\/+$/, ''))
    .default('https://huggingface.co'),
  HF_TOKEN: z.string().optional(),
  /** File holding the token when `HF_TOKEN` is unset; default `$HF_HOME/token` (written by `hf auth login`). */
  HF_TOKEN_PATH: z.string().optional(),
  HF_HUB_OFFLINE: flag.default(false),
  HF_HUB_DISABLE_PROGRESS_BARS: flag.default(false),
  /** Seconds to wait for metadata requests (file listing, HEAD of a file). */
  HF_HUB_ETAG_TIMEOUT: seconds.default(10),
  /** Seconds a download may stall (connect, or no bytes arriving) before it is retried. */
  HF_HUB_DOWNLOAD_TIMEOUT: seconds.default(10),
});

/** The resolved Hugging Face settings; every path is absolute. */
export interface HfEnv {
  /** `HF_HOME`. */
  home: string;
  /** `HF_HUB_CACHE`: the directory holding `models--{org}--{name}` folders. */
  hubCache: string;
  /** `HF_ENDPOINT` without a trailing slash. */
  endpoint: string;
  /** `HF_TOKEN`, if set (a token file is read later, see `tokenPath`). */
  token?: string;
  /** `HF_TOKEN_PATH`, default `$HF_HOME/token`. */
  tokenPath: string;
  /** `HF_HUB_OFFLINE`: never touch the network. */
  offline: boolean;
  /** `HF_HUB_DISABLE_PROGRESS_BARS`: `progress: 'auto'` logs lines instead of drawing a bar. */
  disableProgressBars: boolean;
  metadataTimeoutMs: number;
  downloadTimeoutMs: number;
}

function expandHome(path: string, home: string): string {
  if (path === '~') return home;
  if (path.startsWith('~/')) return join(home, path.slice(2));
  return isAbsolute(path) ? path : resolve(path);
}

/**
 * Reads the Hugging Face settings from `env` (empty variables count as unset), applying the same
 * defaults as `huggingface_hub`, so both find the same cache. Throws `InvalidArgument` naming each
 * bad variable (never its value: `HF_TOKEN` is a secret).
 */
export function loadHfEnv(env: Readonly<Record<string, string | undefined>>): HfEnv {
  const input: Record<string, string> = {};
  for (const key of Object.keys(hfEnvSchema.shape)) {
    const value = env[key];
    if (value !== undefined && value !== '') input[key] = value;
  }
  const parsed = hfEnvSchema.safeParse(input);
  if (!parsed.success) {
    throw new InvalidArgument(`invalid Hugging Face configuration: ${describeIssues('env', parsed.error).replaceAll('env.', '')}`);
  }
  const e = parsed.data;
  const userHome = e.HOME ?? homedir();
  const home = expandHome(e.HF_HOME ?? join(e.XDG_CACHE_HOME ?? join(userHome, '.cache'), 'huggingface'), userHome);
  const hubCache = expandHome(e.HF_HUB_CACHE ?? e.HUGGINGFACE_HUB_CACHE ?? join(home, 'hub'), userHome);
  return Object.freeze({
    home,
    hubCache,
    endpoint: e.HF_ENDPOINT,
    token: e.HF_TOKEN?.trim() || undefined,
    tokenPath: expandHome(e.HF_TOKEN_PATH ?? join(home, 'token'), userHome),
    offline: e.HF_HUB_OFFLINE,
    disableProgressBars: e.HF_HUB_DISABLE_PROGRESS_BARS,
    metadataTimeoutMs: e.HF_HUB_ETAG_TIMEOUT * 1000,
    downloadTimeoutMs: e.HF_HUB_DOWNLOAD_TIMEOUT * 1000,
  });
}

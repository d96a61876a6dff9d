import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** One aiperf load: streaming chat, ISL 128 and OSL 256 tokens, a fixed number of requests. */
export interface AiperfLoad {
  url: string;
  model: string;
  /** The model folder aiperf reads the tokenizer from. */
  tokenizer: string;
  concurrency: number;
  requests: number;
  artifactDir: string;
  /** CPUs to run aiperf on (`taskset -c`), or all. */
  cpus?: string;
  /** A new connection per request instead of kept ones. */
  fresh?: boolean;
  /** Requests a second, sent at a constant rate (never more than `concurrency` at once); else a closed loop. */
  rate?: number;
}

/** What aiperf measured, in its units (ms; ns since the epoch for the window). */
export interface AiperfResult {
  requests: number;
  requestsPerSec: number;
  outputTokensPerSec: number;
  ttftP50: number;
  ttftP99: number;
  itlP50: number;
  itlP99: number;
  errors: number;
  startNs: number;
  endNs: number;
}

export const ISL = 128;
export const OSL = 256;

/** Runs aiperf from the stock venv (next to its `python`) and reads its aggregate export. */
export async function runAiperf(python: string, load: AiperfLoad): Promise<AiperfResult> {
  const args = [
    'profile',
    ...['--model', load.model, '--tokenizer', load.tokenizer, '--url', load.url, '--endpoint-type', 'chat', '--streaming'],
    ...['--prompt-input-tokens-mean', String(ISL), '--prompt-input-tokens-stddev', '0', '--output-tokens-mean', String(OSL), '--output-tokens-stddev', '0'],
    ...['--extra-inputs', 'ignore_eos:true', '--extra-inputs', `min_tokens:${OSL}`, '--use-server-token-count'],
    ...['--concurrency', String(load.concurrency), '--request-count', String(load.requests), '--warmup-request-count', String(2 * load.concurrency)],
    ...['--random-seed', '42', '--ui', 'none', '--no-server-metrics', '--no-gpu-telemetry', '--artifact-dir', load.artifactDir],
    ...(load.fresh ? ['--connection-reuse-strategy', 'never'] : []),
    ...(load.rate === undefined ? [] : ['--request-rate', String(load.rate), '--arrival-pattern', 'constant']),
  ];
  const aiperf = join(dirname(python), 'aiperf');
  const [command, argv] = load.cpus === undefined ? [aiperf, args] : ['taskset', ['-c', load.cpus, aiperf, ...args]];
  // aiperf cannot read a tokenizer from a local folder with HF_HUB_OFFLINE set; a local path never reaches the Hub.
  // Its temporary folders (two per run) go where the caller removes its artifacts, not into /tmp.
  mkdirSync(load.artifactDir, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: load.artifactDir };
  delete env.HF_HUB_OFFLINE;
  const child = spawn(command, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  child.stderr.on('data', (d: Buffer) => (output = (output + d.toString()).slice(-20_000)));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`aiperf exited with ${code} on ${load.model} at concurrency ${load.concurrency}:\n${output.slice(-4000)}`);
  return parseExport(readFileSync(join(load.artifactDir, 'profile_export_aiperf.json'), 'utf8'));
}

/** The figures this benchmark reports, from aiperf's `profile_export_aiperf.json`. */
export function parseExport(text: string): AiperfResult {
  const json = JSON.parse(text) as Record<string, { avg?: number; p50?: number; p99?: number } | string | number | undefined>;
  const metric = (name: string, stat: 'avg' | 'p50' | 'p99') => {
    const m = json[name];
    const value = typeof m === 'object' ? m[stat] : undefined;
    if (typeof value !== 'number') throw new Error(`aiperf's export has no ${name}.${stat}`);
    return value;
  };
  const time = (name: string) => {
    const value = json[name];
    if (typeof value !== 'string') throw new Error(`aiperf's export has no ${name}`);
    return Date.parse(value) * 1e6;
  };
  return {
    requests: metric('request_count', 'avg'),
    requestsPerSec: metric('request_throughput', 'avg'),
    outputTokensPerSec: metric('output_token_throughput', 'avg'),
    ttftP50: metric('time_to_first_token', 'p50'),
    ttftP99: metric('time_to_first_token', 'p99'),
    itlP50: metric('inter_token_latency', 'p50'),
    itlP99: metric('inter_token_latency', 'p99'),
    errors: typeof json.error_request_count === 'object' ? (json.error_request_count.avg ?? 0) : 0,
    startNs: time('start_time'),
    endNs: time('end_time'),
  };
}

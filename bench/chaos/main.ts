// pnpm chaos: our frontend (with a migration budget) in front of a few workers that continue their
// prompt (the sample engine's --follow-prompt), so a migrated answer must equal an unbroken one token
// for token. Streamed completions run at a fixed concurrency while a driver kill -9s a random worker
// every few seconds and starts a new one (then, in a second phase, replaces the workers one by one
// with SIGTERM). Every answer is checked; the report gives requests, exact and inexact answers,
// failures, migrations, kills and latency. Real processes, on file + tcp or etcd + NATS.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { LocalModel, type Tokenizer } from '@dynamo/llm';
import { formatHelp, parseFlags } from '@dynamo/runtime';
import { z } from 'zod';

import { followIds, randomFirst, streamCompletion } from '@dynamo/testing/follow-prompt';
import { Deployment, modelDir, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import type { Child } from '@dynamo/testing/child';

const MODEL = 'chaos';

const count = (max: number) => z.coerce.number().int().min(1, 'must be at least 1').max(max);
const chaosFlags = {
  requests: { schema: count(1_000_000).default(1500), description: 'Streamed requests per phase', placeholder: 'N' },
  concurrency: { schema: count(4096).default(16), description: 'Requests in flight at once', placeholder: 'C' },
  workers: { schema: count(64).default(3), description: 'Workers serving the model', placeholder: 'N' },
  migrationLimit: { schema: z.coerce.number().int().min(0).max(100).default(3), description: "The frontend's --migration-limit", placeholder: 'N' },
  maxTokens: { schema: count(100_000).default(60), description: 'Tokens per answer', placeholder: 'N' },
  delayMs: { schema: z.coerce.number().min(0).max(10_000).default(20), description: "The workers' delay before each token", placeholder: 'MS' },
  everyMinMs: { schema: count(3_600_000).default(2000), description: 'Shortest time between two kills (or replacements)', placeholder: 'MS' },
  everyMaxMs: { schema: count(3_600_000).default(5000), description: 'Longest time between two kills (or replacements)', placeholder: 'MS' },
  phases: {
    schema: z.enum(['both', 'kill', 'sigterm']).default('both'),
    description: 'kill (kill -9 and restart), sigterm (rolling restart), or both, one after the other',
    placeholder: 'WHICH',
  },
  setup: {
    schema: z.enum(['file', 'etcd']).default('file'),
    description: 'file (file discovery + tcp, the embedded default) or etcd (etcd + NATS, servers started here)',
    placeholder: 'KIND',
  },
  json: { schema: z.string().optional(), description: 'Also write the report as JSON to this file', placeholder: 'PATH' },
};

/** The outcome of one phase. */
export interface PhaseReport {
  phase: 'kill' | 'sigterm';
  requests: number;
  exact: number;
  inexact: number;
  failed: number;
  migrations: number;
  /** Workers killed (kill -9) or stopped (SIGTERM). */
  disruptions: number;
  p50Ms: number;
  p99Ms: number;
  seconds: number;
  /** The first few failures and mismatches, to look at. */
  samples: string[];
}

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!);
const between = (min: number, max: number) => min + Math.random() * Math.max(0, max - min);

/** The text the workers answer prompt [first] with: tokens first+1 .. first+n. */
export function expectedText(tokenizer: Tokenizer, first: number, n: number): string {
  return tokenizer.decode(followIds(first, n), false);
}

const migrations = async (url: string) =>
  Number((await (await fetch(`${url}/metrics`)).text()).match(/^dynamo_frontend_model_migration_total\{[^}]*\} (\d+)/m)?.[1] ?? 0);

/** Runs one phase: the requests, and beside them the driver that disrupts the workers. */
async function phase(
  name: 'kill' | 'sigterm',
  options: z.output<z.ZodObject<{ [K in keyof typeof chaosFlags]: (typeof chaosFlags)[K]['schema'] }>>,
  tokenizer: Tokenizer,
): Promise<PhaseReport> {
  const deployment = await Deployment.start(SETUPS.find((s) => s.discovery === options.setup)!, { DYN_FILE_KV_TTL_SECS: '2', DYN_LOG: 'error' });
  const workers: Child[] = [];
  const startWorker = () => {
    const worker = deployment.sampleWorker(['--model-name', MODEL, '--component', MODEL, '--follow-prompt', '--delay-ms', String(options.delayMs)]);
    workers.push(worker);
    return worker;
  };
  try {
    for (let i = 0; i < options.workers; i++) startWorker();
    const { url } = await deployment.frontend(['--migration-limit', String(options.migrationLimit)]);
    await waitForModel(url, MODEL, MODEL, options.workers, 120_000);
    const before = await migrations(url);
    const started = performance.now();
    let running = true;
    let disruptions = 0;
    const driver = (async () => {
      while (running) {
        await new Promise((r) => setTimeout(r, between(options.everyMinMs, options.everyMaxMs)));
        if (!running) break;
        const victim = workers.splice(Math.floor(Math.random() * workers.length), 1)[0];
        if (!victim) continue;
        if (name === 'kill') {
          victim.kill();
          startWorker();
        } else {
          // Rolling: the new worker serves before the old one leaves.
          startWorker();
          await waitForModel(url, MODEL, MODEL, options.workers + 1, 60_000).catch(() => {});
          victim.child.kill('SIGTERM');
          await victim.exited;
        }
        disruptions += 1;
      }
    })();
    const latencies: number[] = [];
    const samples: string[] = [];
    let next = 0;
    let exact = 0;
    let inexact = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (next < options.requests) {
          next += 1;
          const first = randomFirst(options.maxTokens);
          const got = await streamCompletion(url, MODEL, first, options.maxTokens);
          latencies.push(got.totalMs);
          if (got.error !== undefined || !got.complete) {
            failed += 1;
            if (samples.length < 5) samples.push(`prompt [${first}]: ${got.error ?? 'ended without its finish reason and [DONE]'}`);
          } else if (got.text === expectedText(tokenizer, first, options.maxTokens)) exact += 1;
          else {
            inexact += 1;
            if (samples.length < 5) samples.push(`prompt [${first}]: got ${JSON.stringify(got.text.slice(0, 80))}`);
          }
        }
      }),
    );
    running = false;
    await driver;
    const sorted = latencies.sort((a, b) => a - b);
    return {
      phase: name,
      requests: options.requests,
      exact,
      inexact,
      failed,
      migrations: (await migrations(url)) - before,
      disruptions,
      p50Ms: Math.round(percentile(sorted, 50)),
      p99Ms: Math.round(percentile(sorted, 99)),
      seconds: Math.round((performance.now() - started) / 100) / 10,
      samples,
    };
  } finally {
    await deployment.stop();
  }
}

/** Runs `pnpm chaos` with `argv`; returns the reports, printing a table. */
export async function chaos(argv: string[]): Promise<PhaseReport[]> {
  const parsed = parseFlags(chaosFlags, argv, {});
  if (parsed.help) {
    process.stdout.write(formatHelp('pnpm chaos [options]', 'Kill and restart workers under load; check every streamed answer is exact.', chaosFlags));
    return [];
  }
  const options = parsed.values;
  const tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
  const reports: PhaseReport[] = [];
  for (const name of options.phases === 'both' ? (['kill', 'sigterm'] as const) : [options.phases]) reports.push(await phase(name, options, tokenizer));
  const rows = reports.map(
    (r) =>
      `| ${r.phase} | ${r.requests} | ${r.exact} | ${r.inexact} | ${r.failed} | ${r.migrations} | ${r.disruptions} | ${r.p50Ms} | ${r.p99Ms} | ${r.seconds} |`,
  );
  process.stdout.write(
    [
      `chaos: ${options.workers} workers, --migration-limit ${options.migrationLimit}, concurrency ${options.concurrency}, ${options.maxTokens} tokens ${options.delayMs} ms apart, ${options.setup === 'file' ? 'file + tcp' : 'etcd + NATS'}`,
      '',
      '| phase | requests | exact | inexact | failed | migrations | workers killed / stopped | p50 ms | p99 ms | seconds |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...rows,
      ...reports.flatMap((r) => r.samples.map((s) => `${r.phase}: ${s}`)),
      '',
    ].join('\n'),
  );
  if (options.json) writeFileSync(options.json, JSON.stringify(reports, null, 2));
  return reports;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const reports = await chaos(process.argv.slice(2));
  // A failed or inexact answer fails the run.
  process.exitCode = reports.some((r) => r.inexact > 0 || r.failed > 0) ? 1 : 0;
}

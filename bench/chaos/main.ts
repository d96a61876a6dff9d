// pnpm chaos: our frontend (with a migration budget) in front of a few workers that continue their
// prompt (the sample engine's --follow-prompt), so a migrated answer must equal an unbroken one token
// for token. Streamed completions run at a fixed concurrency while a driver kill -9s a random worker
// every few seconds and starts a new one (then, in a second phase, replaces the workers one by one
// with SIGTERM). With --hosts every process runs on a host of its own (network namespaces, as
// test/cluster) and a third phase cuts a random worker's host off the network and heals it. Every
// answer is checked; the report gives requests, exact and inexact answers, failures, migrations,
// disruptions and latency. Real processes, on file + tcp or etcd + NATS.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { LocalModel, type Tokenizer } from '@dynamo/llm';
import { formatHelp, InvalidArgument, parseFlags } from '@dynamo/runtime';
import { z } from 'zod';

import type { Child } from '@dynamo/testing/child';
import { Cluster } from '@dynamo/testing/cluster';
import { followIds, randomFirst, streamCompletion } from '@dynamo/testing/follow-prompt';
import { Deployment, modelDir, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import { clusterUnsupported } from '@dynamo/testing/netns';
import { loopback, type Placement } from '@dynamo/testing/placement';

const MODEL = 'chaos';

const count = (max: number) => z.coerce.number().int().min(1, 'must be at least 1').max(max);
const chaosFlags = {
  requests: { schema: count(1_000_000).default(1500), description: 'Streamed requests per phase', placeholder: 'N' },
  concurrency: { schema: count(4096).default(16), description: 'Requests in flight at once', placeholder: 'C' },
  workers: { schema: count(64).default(3), description: 'Workers serving the model', placeholder: 'N' },
  migrationLimit: { schema: z.coerce.number().int().min(0).max(100).default(3), description: "The frontend's --migration-limit", placeholder: 'N' },
  maxTokens: { schema: count(100_000).default(60), description: 'Tokens per answer', placeholder: 'N' },
  delayMs: { schema: z.coerce.number().min(0).max(10_000).default(20), description: "The workers' delay before each token", placeholder: 'MS' },
  everyMinMs: { schema: count(3_600_000).default(2000), description: 'Shortest time between two disruptions', placeholder: 'MS' },
  everyMaxMs: { schema: count(3_600_000).default(5000), description: 'Longest time between two disruptions', placeholder: 'MS' },
  phases: {
    schema: z.enum(['all', 'kill', 'sigterm', 'partition']).default('all'),
    description:
      'kill (kill -9 and restart), sigterm (rolling restart), partition (a worker host cut off, then healed; --hosts only), or all of them, one after the other',
    placeholder: 'WHICH',
  },
  setup: {
    schema: z.enum(['file', 'etcd']).optional(),
    description: 'file (file discovery + tcp, the embedded default) or etcd (etcd + NATS, servers started here) (default: file; etcd with --hosts)',
    placeholder: 'KIND',
  },
  hosts: {
    schema: z.boolean().default(false),
    boolean: true,
    description: 'Every process on a host of its own: etcd and NATS, the frontend, each worker (network namespaces; needs root, ip and nft)',
  },
  partitionMs: { schema: count(600_000).default(15_000), description: 'How long a partitioned worker host stays cut off', placeholder: 'MS' },
  json: { schema: z.string().optional(), description: 'Also write the report as JSON to this file', placeholder: 'PATH' },
};

/** The outcome of one phase. */
export interface PhaseReport {
  phase: PhaseName;
  requests: number;
  exact: number;
  inexact: number;
  failed: number;
  migrations: number;
  /** Workers killed (kill -9) or stopped (SIGTERM), or worker hosts partitioned. */
  disruptions: number;
  p50Ms: number;
  p99Ms: number;
  seconds: number;
  /** The first few failures and mismatches, to look at. */
  samples: string[];
}

type PhaseName = 'kill' | 'sigterm' | 'partition';
type ChaosOptions = z.output<z.ZodObject<{ [K in keyof typeof chaosFlags]: (typeof chaosFlags)[K]['schema'] }>> & { setup: 'file' | 'etcd' };

const percentile = (sorted: number[], p: number) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!);
const between = (min: number, max: number) => min + Math.random() * Math.max(0, max - min);

/** The text the workers answer prompt [first] with: tokens first+1 .. first+n. */
export function expectedText(tokenizer: Tokenizer, first: number, n: number): string {
  return tokenizer.decode(followIds(first, n), false);
}

const migrations = async (url: string) =>
  Number((await (await fetch(`${url}/metrics`)).text()).match(/^dynamo_frontend_model_migration_total\{[^}]*\} (\d+)/m)?.[1] ?? 0);

/** Runs one phase: the requests, and beside them the driver that disrupts the workers. */
async function phase(name: PhaseName, options: ChaosOptions, tokenizer: Tokenizer): Promise<PhaseReport> {
  // Worker slot i runs on host w<i>: a replacement starts where its predecessor ran.
  const cluster = options.hosts ? await Cluster.create(['infra', 'fe', ...Array.from({ length: options.workers }, (_, i) => `w${i}`)]) : undefined;
  const on = (host: string): Placement => cluster?.host(host) ?? loopback;
  const deployment = await Deployment.start(SETUPS.find((s) => s.discovery === options.setup)!, { DYN_FILE_KV_TTL_SECS: '2', DYN_LOG: 'error' }, on('infra'));
  const workers: Array<{ child: Child; slot: number }> = [];
  const startWorker = (slot: number) => {
    const child = deployment.sampleWorker(
      ['--model-name', MODEL, '--component', MODEL, '--follow-prompt', '--delay-ms', String(options.delayMs)],
      {},
      on(`w${slot}`),
    );
    workers.push({ child, slot });
  };
  try {
    for (let i = 0; i < options.workers; i++) startWorker(i);
    const { url } = await deployment.frontend(['--migration-limit', String(options.migrationLimit)], {}, on('fe'));
    await waitForModel(url, MODEL, MODEL, options.workers, 120_000);
    const before = await migrations(url);
    const started = performance.now();
    let running = true;
    let disruptions = 0;
    const driver = (async () => {
      while (running) {
        await new Promise((r) => setTimeout(r, between(options.everyMinMs, options.everyMaxMs)));
        if (!running) break;
        if (name === 'partition') {
          // The worker stays; its host drops off the network and comes back.
          const host = cluster!.host(`w${Math.floor(Math.random() * options.workers)}`);
          await host.partition();
          await new Promise((r) => setTimeout(r, options.partitionMs));
          await host.heal();
          disruptions += 1;
          continue;
        }
        const victim = workers.splice(Math.floor(Math.random() * workers.length), 1)[0];
        if (!victim) continue;
        if (name === 'kill') {
          victim.child.kill();
          startWorker(victim.slot);
        } else {
          // Rolling: the new worker serves before the old one leaves.
          startWorker(victim.slot);
          await waitForModel(url, MODEL, MODEL, options.workers + 1, 60_000).catch(() => {});
          victim.child.child.kill('SIGTERM');
          await victim.child.exited;
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
    await cluster?.destroy();
  }
}

/** Runs `pnpm chaos` with `argv`; returns the reports, printing a table. */
export async function chaos(argv: string[]): Promise<PhaseReport[]> {
  const parsed = parseFlags(chaosFlags, argv, {});
  if (parsed.help) {
    process.stdout.write(formatHelp('pnpm chaos [options]', 'Kill, restart and cut off workers under load; check every streamed answer is exact.', chaosFlags));
    return [];
  }
  const options: ChaosOptions = { ...parsed.values, setup: parsed.values.setup ?? (parsed.values.hosts ? 'etcd' : 'file') };
  if (options.hosts) {
    if (options.setup === 'file') throw new InvalidArgument('--hosts needs --setup etcd: file discovery is one machine’s');
    const unsupported = await clusterUnsupported();
    if (unsupported !== undefined) throw new InvalidArgument(`--hosts: ${unsupported}`);
  } else if (options.phases === 'partition') throw new InvalidArgument('--phases partition needs --hosts: only a host of its own can be cut off');
  const tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
  const reports: PhaseReport[] = [];
  const names: PhaseName[] = options.phases === 'all' ? ['kill', 'sigterm', ...(options.hosts ? (['partition'] as const) : [])] : [options.phases];
  for (const name of names) reports.push(await phase(name, options, tokenizer));
  const rows = reports.map(
    (r) =>
      `| ${r.phase} | ${r.requests} | ${r.exact} | ${r.inexact} | ${r.failed} | ${r.migrations} | ${r.disruptions} | ${r.p50Ms} | ${r.p99Ms} | ${r.seconds} |`,
  );
  process.stdout.write(
    [
      `chaos: ${options.workers} workers, --migration-limit ${options.migrationLimit}, concurrency ${options.concurrency}, ${options.maxTokens} tokens ${options.delayMs} ms apart, ${options.setup === 'file' ? 'file + tcp' : 'etcd + NATS'}${options.hosts ? `, every process on a host of its own (partitions of ${options.partitionMs / 1000} s)` : ''}`,
      '',
      '| phase | requests | exact | inexact | failed | migrations | workers killed / stopped / hosts partitioned | p50 ms | p99 ms | seconds |',
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

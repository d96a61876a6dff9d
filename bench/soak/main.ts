// pnpm soak: mixed traffic for a long time (30 minutes by default) against our frontend and two
// sample workers, watching every process for leaks. Chat and completions, streamed and not, some
// clients hanging up mid-stream, some malformed bodies, and a rolling worker restart every few
// minutes. Every 10 s it reads each process's /metrics (RSS, V8 heap, external memory, open fds,
// active handles, event-loop delay p99) and at the end writes a table with the growth after warm-up
// and a chart of the series (bench/results/soak.{md,png,json}).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { LocalModel, type Tokenizer } from '@dynamo/llm';
import { formatHelp, parseFlags } from '@dynamo/runtime';
import { z } from 'zod';

import { Deployment, modelDir, once, post, readStream, SETUPS, waitForModel } from '@dynamo/testing/frontend-stack';
import type { Child } from '@dynamo/testing/child';
import { freePort } from '@dynamo/testing/free-port';
import { randomFirst } from '@dynamo/testing/follow-prompt';
import { expectedText } from '../chaos/main.js';
import { renderLines, type SeriesPoint } from '../compare/chart.js';

const MODEL = 'soak';
const resultsDir = fileURLToPath(new URL('../results/', import.meta.url));

const count = (max: number) => z.coerce.number().int().min(1, 'must be at least 1').max(max);
const soakFlags = {
  minutes: {
    schema: z.coerce
      .number()
      .min(0.5, 'must be at least 0.5')
      .max(7 * 24 * 60)
      .default(30),
    description: 'How long the traffic runs',
    placeholder: 'MIN',
  },
  warmupMinutes: {
    schema: z.coerce
      .number()
      .min(0)
      .max(7 * 24 * 60)
      .default(10),
    description: 'Minutes left out of the growth figures (a worker: the first fifth of its life)',
    placeholder: 'MIN',
  },
  concurrency: { schema: count(4096).default(64), description: 'Requests in flight at once', placeholder: 'C' },
  workers: { schema: count(64).default(2), description: 'Workers serving the model', placeholder: 'N' },
  restartEveryMinutes: {
    schema: z.coerce
      .number()
      .min(0)
      .max(24 * 60)
      .default(5),
    description: 'A rolling restart of one worker this often (0: never)',
    placeholder: 'MIN',
  },
  sampleSecs: { schema: z.coerce.number().min(1).max(3600).default(10), description: 'How often every process is read', placeholder: 'SECS' },
  delayMs: { schema: z.coerce.number().min(0).max(10_000).default(5), description: "The workers' delay before each token", placeholder: 'MS' },
  setup: {
    schema: z.enum(['file', 'etcd']).default('file'),
    description: 'file (file discovery + tcp, the embedded default) or etcd (etcd + NATS, servers started here)',
    placeholder: 'KIND',
  },
  out: { schema: z.string().default(resultsDir), description: 'Where soak.md, soak.png and soak.json go', placeholder: 'DIR' },
  from: {
    schema: z.string().optional(),
    description: "Run nothing: write soak.md and soak.png from an earlier run's soak.json (its settings, this run's --warmup-minutes)",
    placeholder: 'PATH',
  },
};
type SoakOptions = z.output<z.ZodObject<{ [K in keyof typeof soakFlags]: (typeof soakFlags)[K]['schema'] }>>;

/** What each process's /metrics says at one moment. */
interface Reading {
  /** Minutes since the traffic started. */
  t: number;
  process: string;
  rssMiB: number;
  heapMiB: number;
  externalMiB: number;
  fds: number;
  handles: number;
  eldP99Ms: number;
}
const SERIES: Array<[keyof Reading, string]> = [
  ['rssMiB', 'RSS (MiB)'],
  ['heapMiB', 'V8 heap used (MiB)'],
  ['externalMiB', 'external memory (MiB)'],
  ['fds', 'open fds'],
  ['handles', 'active handles'],
  ['eldP99Ms', 'event-loop delay p99 (ms)'],
];

/** Outcomes of the traffic. */
interface Tally {
  good: number;
  answered: number;
  failed: number;
  disconnected: number;
  malformed: number;
  malformedRejected: number;
  samples: string[];
}

/** Bodies that must get a 4xx: broken JSON, wrong types, unknown fields' values, an unknown model. */
const MALFORMED: Array<[string, string]> = [
  ['/v1/chat/completions', '{"model": "soak", "messages": ['],
  ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: 'hello' })],
  ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 'ten' })],
  ['/v1/chat/completions', JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }], temperature: -3 })],
  ['/v1/completions', JSON.stringify({ model: MODEL, prompt: { text: 'x' } })],
  ['/v1/completions', JSON.stringify({ model: `${MODEL}-nope`, prompt: 'x' })],
  ['/v1/completions', '\u0000\u0001garbage'],
];

const metric = (text: string, name: string) => Number(text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'))?.[1] ?? Number.NaN);

/** Reads one process's /metrics. */
async function read(url: string, name: string, t: number): Promise<Reading | undefined> {
  const text = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) }).then(
    (r) => r.text(),
    () => undefined,
  );
  if (text === undefined) return undefined;
  return {
    t,
    process: name,
    rssMiB: metric(text, 'process_resident_memory_bytes') / 2 ** 20,
    heapMiB: metric(text, 'nodejs_heap_size_used_bytes') / 2 ** 20,
    externalMiB: metric(text, 'nodejs_external_memory_bytes') / 2 ** 20,
    fds: metric(text, 'process_open_fds'),
    handles: metric(text, 'nodejs_active_handles_total'),
    eldP99Ms: metric(text, 'nodejs_eventloop_lag_p99_seconds') * 1000,
  };
}

/** One good request of a random kind; resolves to an error message, or undefined when it was answered in full. */
async function goodRequest(url: string, tokenizer: Tokenizer, tally: Tally): Promise<string | undefined> {
  const chat = Math.random() < 0.5;
  const streamed = Math.random() < 0.5;
  // A tenth of all requests: a client that hangs up after its first chunk.
  const hangUp = streamed && Math.random() < 0.2;
  const maxTokens = 16 + Math.floor(Math.random() * 48);
  const first = randomFirst(maxTokens);
  const body = chat
    ? { model: MODEL, messages: [{ role: 'user', content: `Count from ${first}.` }], max_tokens: maxTokens, stream: streamed }
    : { model: MODEL, prompt: [first], max_tokens: maxTokens, stream: streamed };
  const stop = new AbortController();
  const res = await post(url, chat ? '/v1/chat/completions' : '/v1/completions', body, { signal: stop.signal });
  if (res.status !== 200) return `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`;
  let text: string;
  let finish: string | undefined;
  if (streamed) {
    const got = await readStream(res, hangUp ? once(1, () => stop.abort()) : undefined).catch((err: Error) =>
      hangUp && err.name === 'AbortError' ? undefined : Promise.reject(err),
    );
    if (got === undefined) {
      tally.disconnected += 1;
      return undefined;
    }
    if (got.error !== undefined) return got.error;
    if (!got.done) return 'the stream ended without [DONE]';
    text = got.text;
    finish = got.finishes.at(-1);
  } else {
    const answer = (await res.json()) as {
      choices: Array<{ text?: string; message?: { content: string }; finish_reason: string }>;
      usage: { completion_tokens: number };
    };
    if (answer.usage.completion_tokens !== maxTokens) return `usage says ${answer.usage.completion_tokens} tokens, not ${maxTokens}`;
    text = answer.choices[0]!.text ?? answer.choices[0]!.message?.content ?? '';
    finish = answer.choices[0]!.finish_reason;
  }
  if (finish !== 'length') return `finish_reason ${finish}, not length`;
  // A completion of token ids continues them (the workers follow the prompt), so its text is known.
  if (!chat && text !== expectedText(tokenizer, first, maxTokens)) return `wrong text ${JSON.stringify(text.slice(0, 60))}`;
  if (text === '') return 'empty answer';
  return undefined;
}

/** One malformed request: it must get a 4xx. */
async function malformedRequest(url: string, tally: Tally): Promise<void> {
  const [path, body] = MALFORMED[Math.floor(Math.random() * MALFORMED.length)]!;
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  await res.arrayBuffer();
  tally.malformed += 1;
  if (res.status >= 400 && res.status < 500) tally.malformedRejected += 1;
  else if (tally.samples.length < 10) tally.samples.push(`malformed body to ${path} got ${res.status}`);
}

/** Growth of `key` over the readings from `from` on: the least-squares line's end less its start, in % of its start. */
function growth(readings: Reading[], key: keyof Reading, from: number): number | undefined {
  const xs = readings.filter((r) => r.t >= from);
  if (xs.length < 3) return undefined;
  const n = xs.length;
  const mt = xs.reduce((a, r) => a + r.t, 0) / n;
  const mv = xs.reduce((a, r) => a + (r[key] as number), 0) / n;
  const slope = xs.reduce((a, r) => a + (r.t - mt) * ((r[key] as number) - mv), 0) / xs.reduce((a, r) => a + (r.t - mt) ** 2, 0);
  const start = mv + slope * (xs[0]!.t - mt);
  const end = mv + slope * (xs.at(-1)!.t - mt);
  return ((end - start) / start) * 100;
}

const fmt = (x: number | undefined, digits = 1) => (x === undefined || Number.isNaN(x) ? '–' : x.toFixed(digits));
const range = (xs: number[]) => `${Math.min(...xs)}–${Math.max(...xs)}`;

/** The report: a row per process, the traffic's outcome, and the settings. */
function report(options: SoakOptions, readings: Reading[], tally: Tally, restarts: number, when: string): string {
  const processes = [...new Set(readings.map((r) => r.process))];
  const rows = processes.map((name) => {
    const own = readings.filter((r) => r.process === name);
    const lifetime = own.at(-1)!.t - own[0]!.t;
    const from = name === 'frontend' ? options.warmupMinutes : own[0]!.t + lifetime / 5;
    const after = own.filter((r) => r.t >= from);
    const last = own.at(-1)!;
    return `| ${name} | ${fmt(own[0]!.t)}–${fmt(last.t)} | ${fmt(after[0]?.rssMiB)} → ${fmt(last.rssMiB)} | ${fmt(growth(own, 'rssMiB', from))}% | ${fmt(after[0]?.heapMiB)} → ${fmt(last.heapMiB)} | ${fmt(growth(own, 'heapMiB', from))}% | ${fmt(growth(own, 'externalMiB', from))}% | ${range(after.map((r) => r.fds))} | ${fmt(growth(own, 'fds', from))}% | ${range(after.map((r) => r.handles))} | ${fmt(growth(own, 'handles', from))}% | ${fmt(Math.max(...after.map((r) => r.eldP99Ms)))} |`;
  });
  return [
    `# pnpm soak, ${when}`,
    '',
    `${options.minutes} minutes of mixed traffic at concurrency ${options.concurrency} against our frontend (\`--migration-limit 3\`) and ${options.workers} sample workers (\`--follow-prompt --delay-ms ${options.delayMs}\`), ${options.setup === 'file' ? 'file + tcp' : 'etcd + NATS'}: chat and completions, streamed and not; a tenth of the requests hang up after their first chunk, a twentieth are malformed; a rolling restart of one worker every ${options.restartEveryMinutes} minutes (${restarts} in all). Every process's \`/metrics\` read every ${options.sampleSecs} s.`,
    '',
    `Growth is the least-squares line's rise over the readings after warm-up (the frontend: from minute ${options.warmupMinutes}; a worker: after the first fifth of its life), in % of where the line starts. fds, handles and event-loop delay are over the same readings.`,
    '',
    '| process | minutes | RSS MiB after warm-up → end | RSS growth | heap MiB after warm-up → end | heap growth | external growth | open fds | fds growth | active handles | handles growth | event-loop p99 max (ms) |',
    '| --- | --- | --- | ---: | --- | ---: | ---: | --- | ---: | --- | ---: | ---: |',
    ...rows,
    '',
    `Good requests: ${tally.good}, answered: ${tally.answered} (${tally.disconnected} of them hung up by the client after the first chunk, the rest in full), failed: ${tally.failed}. Malformed: ${tally.malformed}, rejected with a 4xx: ${tally.malformedRejected}.`,
    ...(tally.samples.length > 0 ? ['', 'First problems:', '', ...tally.samples.map((s) => `- ${s}`)] : []),
    '',
    '![soak](soak.png)',
    '',
  ].join('\n');
}

/** A finished run, as soak.json keeps it. */
interface Run {
  options: SoakOptions;
  /** When it ended (UTC, minutes). */
  when: string;
  tally: Tally;
  restarts: number;
  readings: Reading[];
}

/** Writes soak.md and soak.png of `run` into `dir`, and prints the report. */
async function writeReport(run: Run, dir: string): Promise<void> {
  const { options, when, tally, restarts, readings } = run;
  const md = report(options, readings, tally, restarts, when);
  writeFileSync(join(dir, 'soak.md'), md);
  const points: SeriesPoint[] = readings.flatMap((r) => SERIES.map(([key, metric]) => ({ metric, series: r.process, t: r.t, value: r[key] as number })));
  writeFileSync(
    join(dir, 'soak.png'),
    await renderLines(points, `pnpm soak, ${when}: ${options.minutes} min at c=${options.concurrency}, ${restarts} worker restarts`),
  );
  process.stdout.write(md);
}

/** Runs `pnpm soak` with `argv`; returns whether every good request was answered and every malformed one rejected. */
export async function soak(argv: string[]): Promise<boolean> {
  const parsed = parseFlags(soakFlags, argv, {});
  if (parsed.help) {
    process.stdout.write(
      formatHelp('pnpm soak [options]', 'Run mixed traffic for a long time and watch every process for leaks; writes soak.{md,png,json}.', soakFlags),
    );
    return true;
  }
  const options = parsed.values;
  if (options.from !== undefined) {
    const run = JSON.parse(readFileSync(options.from, 'utf8')) as Run;
    await writeReport({ ...run, options: { ...run.options, warmupMinutes: options.warmupMinutes } }, options.out);
    return run.tally.failed === 0 && run.tally.malformedRejected === run.tally.malformed;
  }
  const tokenizer = await (await LocalModel.load(modelDir)).tokenizer();
  const deployment = await Deployment.start(SETUPS.find((s) => s.discovery === options.setup)!, { DYN_FILE_KV_TTL_SECS: '2', DYN_LOG: 'error' });
  const workers: Array<{ child: Child; url: string; name: string }> = [];
  let started = 0;
  const startWorker = async () => {
    const port = await freePort();
    const name = `worker ${++started}`;
    const child = deployment.sampleWorker(['--model-name', MODEL, '--component', MODEL, '--follow-prompt', '--delay-ms', String(options.delayMs)], {
      DYN_SYSTEM_PORT: String(port),
      DYN_SYSTEM_HOST: '127.0.0.1',
    });
    workers.push({ child, url: `http://127.0.0.1:${port}`, name });
  };
  try {
    for (let i = 0; i < options.workers; i++) await startWorker();
    const { url } = await deployment.frontend(['--migration-limit', '3']);
    await waitForModel(url, MODEL, MODEL, options.workers, 120_000);
    const t0 = performance.now();
    const minutes = () => (performance.now() - t0) / 60_000;
    const ends = t0 + options.minutes * 60_000;
    const readings: Reading[] = [];
    const sampler = setInterval(() => {
      // Readings taken while the last requests drain would not show the steady state.
      if (performance.now() >= ends) return;
      const t = minutes();
      void Promise.all([read(url, 'frontend', t), ...workers.map((w) => read(w.url, w.name, t))]).then((rs) => {
        for (const r of rs) if (r) readings.push(r);
        const f = rs[0];
        if (f)
          process.stdout.write(
            `${fmt(t)} min: frontend RSS ${fmt(f.rssMiB)} MiB, heap ${fmt(f.heapMiB)} MiB, fds ${f.fds}; ${tally.answered} answered, ${tally.failed} failed\n`,
          );
      });
    }, options.sampleSecs * 1000);
    let restarts = 0;
    const restarter = (async () => {
      if (options.restartEveryMinutes === 0) return;
      for (;;) {
        const next = t0 + (restarts + 1) * options.restartEveryMinutes * 60_000;
        if (next >= ends) return;
        await new Promise((r) => setTimeout(r, next - performance.now()));
        // Rolling: the new worker serves before the oldest leaves.
        await startWorker();
        await waitForModel(url, MODEL, MODEL, options.workers + 1, 60_000).catch(() => {});
        const oldest = workers.shift()!;
        oldest.child.child.kill('SIGTERM');
        await oldest.child.exited;
        restarts += 1;
      }
    })();
    const tally: Tally = { good: 0, answered: 0, failed: 0, disconnected: 0, malformed: 0, malformedRejected: 0, samples: [] };
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (performance.now() < ends) {
          if (Math.random() < 0.05) {
            await malformedRequest(url, tally);
            continue;
          }
          tally.good += 1;
          const problem = await goodRequest(url, tokenizer, tally).catch((err: Error) => err.message);
          if (problem === undefined) tally.answered += 1;
          else {
            tally.failed += 1;
            if (tally.samples.length < 10) tally.samples.push(problem);
          }
        }
      }),
    );
    await restarter;
    clearInterval(sampler);
    const run: Run = { options, when: new Date().toISOString().slice(0, 16).replace('T', ' '), tally, restarts, readings };
    writeFileSync(join(options.out, 'soak.json'), JSON.stringify(run, null, 1));
    await writeReport(run, options.out);
    return tally.failed === 0 && tally.malformedRejected === tally.malformed;
  } finally {
    await deployment.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = (await soak(process.argv.slice(2))) ? 0 : 1;

// Benchmark: dynamo-sample-engine as a Dynamo worker (run()), beside the stock Python sample engine
// (`python -m dynamo.common.backend.sample_main` from the test venv) driven by the same caller in
// the same run: time from process start to serving, streamed tokens/s and worker CPU per 256-token
// request at 1 and 64 concurrent callers (--delay-ms 0), worker RSS idle and under load, and the CPU
// an idle worker spends (timers, keep-alives) per second.
// Targets: serving in under 500 ms; at least 3x stock's tokens per CPU-second. `pnpm bench`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';

import { type Child, startChild } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { cpuMs, median, rssMiB } from '@dynamo/testing/proc-stats';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
import { stockPython } from '@dynamo/testing/stock-dynamo';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'dist', 'cli.js');
const modelDir = qwen3ModelDir();
const kvDir = mkdtempSync(join(tmpdir(), 'sample-bench-'));
const env = {
  DYN_DISCOVERY_BACKEND: 'file',
  DYN_FILE_KV: kvDir,
  DYN_REQUEST_PLANE: 'tcp',
  DYN_TCP_RPC_HOST: '127.0.0.1',
  DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1',
  DYN_LOG: 'info',
};
const OSL = 256;
const startupRuns = Number(process.env.BENCH_STARTUP_RUNS ?? 5);
const IDLE_MS = 10_000;

const ours = (component: string, extra: string[] = []) =>
  startChild(
    process.execPath,
    [cli, '--model-path', modelDir, '--model-name', `bench-${component}`, '--component', component, '--delay-ms', '0', ...extra],
    env,
  );

/** Milliseconds from spawn to the "Serving ..." log line, median of a few cold starts. */
async function timeToServing(): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < startupRuns; i++) {
    const began = performance.now();
    const worker = ours(`startup${i}`);
    await waitFor('Serving', () => worker.stderr().includes('"msg":"Serving '), 30_000);
    times.push(performance.now() - began);
    worker.child.kill('SIGTERM');
    await worker.exited;
  }
  return times;
}

interface Row {
  worker: string;
  concurrency: number;
  tokensPerSec: number;
  cpuMsPerRequest: number;
  tokensPerCpuSec: number;
  rssIdle: number;
  rssLoad: number;
  idleCpuMsPerSec: number;
}

async function drive(runtime: DistributedRuntime, label: string, path: string, worker: Child): Promise<Row[]> {
  const client = await runtime.endpoint(path).client();
  await client.waitForInstances({ timeoutMs: 60_000 });
  const one = async () => {
    let tokens = 0;
    for await (const chunk of client.roundRobin({
      token_ids: [1, 2, 3, 4, 5, 6, 7, 8],
      stop_conditions: { max_tokens: OSL, ignore_eos: true },
      sampling_options: {},
      output_options: {},
    })) {
      tokens += (chunk as { token_ids?: number[] }).token_ids?.length ?? 0;
    }
    if (tokens !== OSL) throw new Error(`${label}: a request streamed ${tokens} tokens, expected ${OSL}`);
    return tokens;
  };
  for (let i = 0; i < 20; i++) await one(); // warm-up
  const pid = worker.child.pid!;
  const rssIdle = rssMiB(pid);
  await sleep(IDLE_MS / 2); // past the garbage collections that follow activity
  const idleBefore = cpuMs(pid);
  await sleep(IDLE_MS);
  const idleCpuMsPerSec = (cpuMs(pid) - idleBefore) / (IDLE_MS / 1000);
  const rows: Row[] = [];
  for (const concurrency of [1, 64]) {
    const requests = concurrency === 1 ? 60 : 640;
    let peak = rssIdle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 50);
    const cpuBefore = cpuMs(pid);
    const began = performance.now();
    let next = 0;
    let tokens = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < requests) {
          const streamed = await one();
          tokens += streamed;
        }
      }),
    );
    const seconds = (performance.now() - began) / 1000;
    const cpu = cpuMs(pid) - cpuBefore;
    clearInterval(sampler);
    rows.push({
      worker: label,
      concurrency,
      tokensPerSec: tokens / seconds,
      cpuMsPerRequest: cpu / requests,
      tokensPerCpuSec: tokens / (cpu / 1000),
      rssIdle,
      rssLoad: peak,
      idleCpuMsPerSec,
    });
  }
  return rows;
}

const workers: Child[] = [];
try {
  const startup = await timeToServing();
  console.log(
    `time from process start to "Serving" (sample engine, ${startupRuns} cold starts): median ${median(startup).toFixed(0)} ms, min ${Math.min(...startup).toFixed(0)} ms`,
  );
  console.log(`  target: under 500 ms -> ${median(startup) < 500 ? 'PASS' : 'FAIL'}`);

  const runtime = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...env, DYN_LOG: 'error' }) });
  const ts = ours('ts', ['--disable-kv-routing']);
  workers.push(ts);
  const rows = await drive(runtime, 'ours (TypeScript)', 'dynamo.ts.generate', ts);

  const stock = stockPython();
  if ('skip' in stock) {
    console.log(`stock sample engine: not measured (${stock.skip})`);
  } else {
    // Stock's --model-name is the model path too (it registers that folder's card).
    const args = [
      '-m',
      'dynamo.common.backend.sample_main',
      '--model-name',
      modelDir,
      '--namespace',
      'dynamo',
      '--component',
      'py',
      '--endpoint',
      'generate',
      '--delay',
      '0',
      '--discovery-backend',
      'file',
      '--request-plane',
      'tcp',
      '--disable-kv-routing',
    ];
    const py = startChild(stock.python, args, { ...env, DYN_LOG: 'warn', HF_HUB_OFFLINE: '1' });
    workers.push(py);
    try {
      rows.push(...(await drive(runtime, 'stock 1.6.1 (Python)', 'dynamo.py.generate', py)));
    } catch (err) {
      console.log(`stock sample engine: failed (${(err as Error).message}); its stderr:\n${py.stderr().slice(-3000)}`);
    }
  }
  await runtime.shutdown();

  console.log(`\none worker at --delay-ms 0, ${OSL}-token streamed requests, same caller (our runtime client):`);
  console.log('worker                  conc   tokens/s   CPU ms/req   tokens/CPU-s   RSS idle   RSS load   idle CPU ms/s');
  for (const r of rows) {
    console.log(
      `${r.worker.padEnd(22)} ${String(r.concurrency).padStart(5)} ${r.tokensPerSec.toFixed(0).padStart(10)} ${r.cpuMsPerRequest.toFixed(2).padStart(12)} ${r.tokensPerCpuSec.toFixed(0).padStart(14)} ${r.rssIdle.toFixed(0).padStart(7)} MiB ${r.rssLoad.toFixed(0).padStart(6)} MiB ${r.idleCpuMsPerSec.toFixed(1).padStart(14)}`,
    );
  }
  for (const concurrency of [1, 64]) {
    const [a, b] = [
      rows.find((r) => r.concurrency === concurrency && r.worker.startsWith('ours')),
      rows.find((r) => r.concurrency === concurrency && r.worker.startsWith('stock')),
    ];
    if (a && b) {
      const ratio = a.tokensPerCpuSec / b.tokensPerCpuSec;
      console.log(`  concurrency ${concurrency}: ours/stock tokens per CPU-second ${ratio.toFixed(2)}x (target >= 3x -> ${ratio >= 3 ? 'PASS' : 'FAIL'})`);
    }
  }
} finally {
  for (const w of workers) {
    w.child.kill('SIGTERM');
    await Promise.race([w.exited, new Promise((r) => setTimeout(r, 5000))]);
    w.kill();
  }
  rmSync(kvDir, { recursive: true, force: true });
}

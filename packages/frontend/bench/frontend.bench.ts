// Benchmark: dynamo-frontend beside the stock Dynamo 1.6.1 frontend (`python -m dynamo.frontend`
// from the test venv), both in front of the same dynamo-sample-engine worker (--delay-ms 0) on file
// discovery + tcp, driven by the same HTTP client in the same run. `pnpm bench`.
//
//   1. Frontend overhead at concurrency 1: streamed chat TTFT through our frontend minus the TTFT
//      of the same preprocessed request sent straight to the worker with the runtime client,
//      interleaved request by request; p50; target <= 1 ms.
//   2. Concurrency 64, ISL 128 (the user message), OSL 256: output tokens/s (target >= 1.0x stock)
//      and frontend CPU ms per request (target <= 1.0x stock), on keep-alive connections and on a
//      new connection per request (the stock frontend leaves Nagle on, which stalls each response
//      on a reused connection by a delayed ACK; fresh connections take that out of the ratio).
//   3. Frontend RSS idle (model loaded, after the warm-up) and its peak under load.
// Both frontends log at their default level (info); the stock one logs two lines per request, so
// it is measured once more at DYN_LOG=warn. Prints tables with PASS/FAIL and exits 0: a report.
//
// Knobs: BENCH_C1_REQUESTS=300  BENCH_C64_REQUESTS=1280
import { readFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';

import type { Child } from '../../runtime/test/harness/child.js';
import { freePort, waitFor } from '../../runtime/test/harness/free-port.js';
import { stockPython } from '../../runtime/test/harness/stock-dynamo.js';
import { Deployment, modelDir } from '../test/support/stack.js';

const OSL = 256;
const ISL = 128;
const CONCURRENCY = 64;
const c1Requests = Number(process.env.BENCH_C1_REQUESTS ?? 300);
const c64Requests = Number(process.env.BENCH_C64_REQUESTS ?? 1280);
const CLK_TCK = 100; // Linux USER_HZ
const MODEL = 'qwen3';
const COMPONENT = 'bench';

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

/** User + system CPU of a process so far, in ms (all its threads). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
}

function rssMiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}

/** A user message of exactly ISL tokens of the model's tokenizer. */
function userMessage(preprocessor: Preprocessor): string {
  const words = ['serve', 'model', 'token', 'cache', 'route', 'stream', 'worker', 'frontend', 'prefill', 'decode'];
  let text = '';
  for (let i = 0; preprocessor.tokenizer.encodeSync(text, false).length < ISL; i++) text += ` ${words[(i * 7) % words.length]}`;
  return text;
}

interface Streamed {
  ttftMs: number;
  tokens: number;
}

/**
 * One streamed chat completion over `agent` (false: a new connection, closed after): the time to
 * the first event with content, and the completion tokens its usage chunk reports.
 */
function streamChat(url: string, payload: string, agent: Agent | false): Promise<Streamed> {
  return new Promise((resolve, reject) => {
    const began = performance.now();
    const req = httpRequest(`${url}/v1/chat/completions`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      res.setEncoding('utf8');
      let ttftMs = -1;
      let tail = '';
      res.on('data', (text: string) => {
        if (ttftMs < 0 && /"content":"[^"]/.test(text)) ttftMs = performance.now() - began;
        tail = (tail + text).slice(-4096);
      });
      res.on('end', () => {
        const tokens = /"completion_tokens":(\d+)/.exec(tail);
        if (res.statusCode !== 200 || !tokens || !tail.includes('data: [DONE]')) reject(new Error(`${url}: status ${res.statusCode}, stream ended with: ${tail.slice(-500)}`));
        else resolve({ ttftMs, tokens: Number(tokens[1]) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

interface LoadRow {
  frontend: string;
  connections: string;
  tokensPerSec: number;
  cpuMsPerRequest: number;
  ttftP50: number;
  clientCpuPct: number;
  rssPeak: number;
}

/** `total` streamed requests at CONCURRENCY through the frontend process `pid`. */
async function load(frontend: string, url: string, pid: number, payload: string, fresh: boolean, total: number): Promise<LoadRow> {
  const agent = fresh ? false : new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let peak = rssMiB(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 100);
  const cpuBefore = cpuMs(pid);
  const clientBefore = process.cpuUsage();
  const began = performance.now();
  let next = 0;
  let tokens = 0;
  const ttfts: number[] = [];
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < total) {
        const r = await streamChat(url, payload, agent);
        if (r.tokens !== OSL) throw new Error(`${frontend}: a request streamed ${r.tokens} tokens, expected ${OSL}`);
        tokens += r.tokens;
        ttfts.push(r.ttftMs);
      }
    }),
  );
  const ms = performance.now() - began;
  const cpu = cpuMs(pid) - cpuBefore;
  const client = process.cpuUsage(clientBefore);
  clearInterval(sampler);
  if (agent) agent.destroy();
  return {
    frontend,
    connections: fresh ? 'new per request' : 'keep-alive',
    tokensPerSec: tokens / (ms / 1000),
    cpuMsPerRequest: cpu / total,
    ttftP50: percentile(ttfts, 0.5),
    clientCpuPct: ((client.user + client.system) / 1000 / ms) * 100,
    rssPeak: peak,
  };
}

interface Measured {
  frontend: string;
  rssIdle: number;
  ttftC1: { keepAlive: number; fresh: number };
  rows: LoadRow[];
}

/** Idle RSS, c=1 TTFT and the c=64 loads of one running frontend. */
async function measure(frontend: string, url: string, child: Child, payload: string, warnOnly = false): Promise<Measured> {
  await waitFor(`${frontend} to serve ${MODEL}`, async () => ((await (await fetch(`${url}/v1/models`).catch(() => undefined))?.text()) ?? '').includes(`"${MODEL}"`), 60_000).catch((err: Error) => {
    throw new Error(`${err.message}\n${child.stderr().slice(-3000)}`);
  });
  const pid = child.child.pid!;
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 20; i++) await streamChat(url, payload, keepAlive);
  const rssIdle = rssMiB(pid);
  const ttftC1 = { keepAlive: 0, fresh: 0 };
  if (!warnOnly) {
    const kept: number[] = [];
    const fresh: number[] = [];
    for (let i = 0; i < 100; i++) {
      kept.push((await streamChat(url, payload, keepAlive)).ttftMs);
      fresh.push((await streamChat(url, payload, false)).ttftMs);
    }
    Object.assign(ttftC1, { keepAlive: percentile(kept, 0.5), fresh: percentile(fresh, 0.5) });
  }
  keepAlive.destroy();
  await load(frontend, url, pid, payload, false, CONCURRENCY * 2); // warm-up at load
  const rows = [await load(frontend, url, pid, payload, false, c64Requests)];
  if (!warnOnly) rows.push(await load(frontend, url, pid, payload, true, c64Requests));
  return { frontend, rssIdle, ttftC1, rows };
}

/** Our frontend's added TTFT at concurrency 1: through it vs straight to the worker, interleaved. */
async function overheadC1(url: string, deployment: Deployment, preprocessor: Preprocessor, body: Record<string, unknown>): Promise<{ viaFrontend: number; direct: number }> {
  const runtime = await DistributedRuntime.create({ config: loadRuntimeConfig({ ...deployment.env, DYN_LOG: 'error' }) });
  try {
    const client = await runtime.endpoint(`dynamo.${COMPONENT}.generate`).client();
    const [instance] = await client.waitForInstances({ timeoutMs: 30_000 });
    const { request } = await preprocessor.preprocessChat(body);
    const direct = async () => {
      const began = performance.now();
      let ttft = -1;
      let tokens = 0;
      for await (const chunk of client.direct<{ token_ids?: number[] }>(request, instance!)) {
        if (ttft < 0 && chunk.token_ids?.length) ttft = performance.now() - began;
        tokens += chunk.token_ids?.length ?? 0;
      }
      if (tokens !== OSL) throw new Error(`direct call streamed ${tokens} tokens, expected ${OSL}`);
      return ttft;
    };
    const payload = JSON.stringify(body);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 20; i++) (await direct(), await streamChat(url, payload, agent));
    const via: number[] = [];
    const straight: number[] = [];
    for (let i = 0; i < c1Requests; i++) {
      straight.push(await direct());
      via.push((await streamChat(url, payload, agent)).ttftMs);
    }
    agent.destroy();
    return { viaFrontend: percentile(via, 0.5), direct: percentile(straight, 0.5) };
  } finally {
    await runtime.shutdown();
  }
}

async function stop(child: Child): Promise<void> {
  child.child.kill('SIGTERM');
  await Promise.race([child.exited, new Promise((r) => setTimeout(r, 10_000))]);
  child.kill();
}

const f = (x: number, digits = 0) => x.toFixed(digits);
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

const loopback = { DYN_TCP_RPC_HOST: '127.0.0.1', DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1' };
const deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, loopback);
try {
  const model = await LocalModel.load(modelDir);
  const preprocessor = await Preprocessor.create(model, buildCard(model, { modelName: MODEL, modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions }));
  const body = { model: MODEL, messages: [{ role: 'user', content: userMessage(preprocessor) }], max_tokens: OSL, min_tokens: OSL, ignore_eos: true, stream: true, stream_options: { include_usage: true } };
  const payload = JSON.stringify(body);
  const promptTokens = (await preprocessor.preprocessChat(body)).request.token_ids.length;

  deployment.sampleWorker(['--model-name', MODEL, '--component', COMPONENT, '--delay-ms', '0', '--disable-kv-routing']);

  const ours = await deployment.frontend([], { DYN_LOG: 'info' });
  const overhead = await overheadC1(ours.url, deployment, preprocessor, body);
  const results = [await measure('ours (TypeScript)', ours.url, ours.child, payload)];
  await stop(ours.child);

  const stock = stockPython();
  if ('skip' in stock) console.log(`stock frontend: not measured (${stock.skip})`);
  else {
    for (const level of ['info', 'warn'] as const) {
      const port = await freePort();
      const args = ['-m', 'dynamo.frontend', '--http-host', '127.0.0.1', '--http-port', String(port), '--discovery-backend', 'file', '--request-plane', 'tcp'];
      const child = deployment.stockProcess(stock.python, args, { DYN_LOG: level });
      try {
        results.push(await measure(`stock 1.6.1 (DYN_LOG=${level})`, `http://127.0.0.1:${port}`, child, payload, level === 'warn'));
      } finally {
        await stop(child);
      }
    }
  }

  console.log(`\n1. frontend overhead at concurrency 1 (chat, ${promptTokens} prompt tokens, ${OSL} streamed, ${c1Requests} interleaved pairs, p50 TTFT):`);
  console.log(`   direct runtime-client call ${f(overhead.direct, 2)} ms, through dynamo-frontend ${f(overhead.viaFrontend, 2)} ms`);
  const added = overhead.viaFrontend - overhead.direct;
  console.log(`   added by the frontend: ${f(added, 2)} ms (target <= 1 ms -> ${verdict(added <= 1)})`);

  console.log(`\n2. concurrency ${CONCURRENCY}, ${OSL}-token streamed chat, ${c64Requests} requests, one sample worker at --delay-ms 0:`);
  console.log('frontend                  connections       out tok/s  fe CPU ms/req  TTFT p50 ms  client CPU %  RSS idle  RSS peak  c=1 TTFT p50 keep-alive / new conn');
  for (const m of results) {
    for (const r of m.rows) {
      const c1 = m.ttftC1.keepAlive ? `${f(m.ttftC1.keepAlive, 2)} / ${f(m.ttftC1.fresh, 2)} ms` : '-';
      console.log(
        `${m.frontend.padEnd(25)} ${r.connections.padEnd(16)} ${f(r.tokensPerSec).padStart(10)} ${f(r.cpuMsPerRequest, 2).padStart(14)} ${f(r.ttftP50, 1).padStart(12)} ${f(r.clientCpuPct).padStart(12)} ${f(m.rssIdle).padStart(5)} MiB ${f(r.rssPeak).padStart(5)} MiB  ${c1}`,
      );
    }
  }
  const [mine, theirs] = [results[0]!, results[1]];
  if (theirs) {
    for (const connections of ['keep-alive', 'new per request']) {
      const a = mine.rows.find((r) => r.connections === connections)!;
      const b = theirs.rows.find((r) => r.connections === connections)!;
      const speed = a.tokensPerSec / b.tokensPerSec;
      const cpu = a.cpuMsPerRequest / b.cpuMsPerRequest;
      console.log(`   ${connections}: ours/stock output tokens/s ${f(speed, 2)}x (target >= 1.0x -> ${verdict(speed >= 1)}), frontend CPU ms/request ${f(cpu, 2)}x (target <= 1.0x -> ${verdict(cpu <= 1)})`);
    }
    console.log(`   RSS ours/stock: idle ${f(mine.rssIdle / theirs.rssIdle, 2)}x, under load ${f(mine.rows[0]!.rssPeak / theirs.rows[0]!.rssPeak, 2)}x`);
  }
} finally {
  await deployment.stop();
}

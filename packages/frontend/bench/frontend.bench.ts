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
//   4. What fastify costs: the same canned SSE stream (bench/sse-server.ts) served by a fastify
//      route and by a plain node:http handler; streamed tokens/s at concurrency 64 (fastify is
//      kept unless it loses more than 10%) and c=1 TTFT.
// All frontends run at once (an idle one costs nothing) and the loads are interleaved over
// several rounds, frontend by frontend, so drift in this machine's speed hits each alike; the
// figures are medians over the rounds. Both log at their default level (info); the stock one logs
// two lines per request, so it is measured again at DYN_LOG=warn. Prints tables with PASS/FAIL and
// exits 0: a report.
//
// Knobs: BENCH_C1_REQUESTS=300  BENCH_C64_REQUESTS=640 (per round)  BENCH_ROUNDS=3
import { join } from 'node:path';
import { Agent, request as httpRequest } from 'node:http';
import { performance } from 'node:perf_hooks';
import { buildCard, LocalModel, ModelInput, ModelType, Preprocessor } from '@dynamo/llm';
import { DistributedRuntime, loadRuntimeConfig } from '@dynamo/runtime';

import { type Child, startChild } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';
import { cpuMs, median, percentile, rssMiB } from '@dynamo/testing/proc-stats';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { Deployment, modelDir, packageDir } from '@dynamo/testing/frontend-stack';

const OSL = 256;
const ISL = 128;
const CONCURRENCY = 64;
const c1Requests = Number(process.env.BENCH_C1_REQUESTS ?? 300);
const c64Requests = Number(process.env.BENCH_C64_REQUESTS ?? 640);
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const MODEL = 'qwen3';
const COMPONENT = 'bench';

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
    const req = httpRequest(
      `${url}/v1/chat/completions`,
      { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        res.setEncoding('utf8');
        let ttftMs = -1;
        let tail = '';
        res.on('data', (text: string) => {
          if (ttftMs < 0 && /"content":"[^"]/.test(text)) ttftMs = performance.now() - began;
          tail = (tail + text).slice(-4096);
        });
        res.on('end', () => {
          const tokens = /"completion_tokens":(\d+)/.exec(tail);
          if (res.statusCode !== 200 || !tokens || !tail.includes('data: [DONE]'))
            reject(new Error(`${url}: status ${res.statusCode}, stream ended with: ${tail.slice(-500)}`));
          else resolve({ ttftMs, tokens: Number(tokens[1]) });
        });
        res.on('error', reject);
      },
    );
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

/** A frontend under test: a running process serving MODEL at `url`. */
interface Frontend {
  name: string;
  url: string;
  child: Child;
  /** Also measured on a new connection per request. */
  freshConnections: boolean;
  rssIdle: number;
  ttftC1?: { keepAlive: number; fresh: number };
  rows: LoadRow[];
}

async function ready(fe: Frontend, payload: string): Promise<void> {
  await waitFor(
    `${fe.name} to serve ${MODEL}`,
    async () => ((await (await fetch(`${fe.url}/v1/models`).catch(() => undefined))?.text()) ?? '').includes(`"${MODEL}"`),
    60_000,
  ).catch((err: Error) => {
    throw new Error(`${err.message}\n${fe.child.stderr().slice(-3000)}`);
  });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 20; i++) await streamChat(fe.url, payload, agent);
  agent.destroy();
  await load(fe.name, fe.url, fe.child.child.pid!, payload, false, CONCURRENCY * 2); // warm-up at load
  fe.rssIdle = rssMiB(fe.child.child.pid!);
}

/** p50 TTFT at concurrency 1 on a kept connection and on new ones, interleaved. */
async function ttftC1(fe: Frontend, payload: string): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const kept: number[] = [];
  const fresh: number[] = [];
  for (let i = 0; i < 100; i++) {
    kept.push((await streamChat(fe.url, payload, agent)).ttftMs);
    fresh.push((await streamChat(fe.url, payload, false)).ttftMs);
  }
  agent.destroy();
  fe.ttftC1 = { keepAlive: median(kept), fresh: median(fresh) };
}

/** Our frontend's added TTFT at concurrency 1: through it vs straight to the worker, interleaved. */
async function overheadC1(
  url: string,
  deployment: Deployment,
  preprocessor: Preprocessor,
  body: Record<string, unknown>,
): Promise<{ viaFrontend: number; direct: number }> {
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
    for (let i = 0; i < 20; i++) {
      await direct();
      await streamChat(url, payload, agent);
    }
    const via: number[] = [];
    const straight: number[] = [];
    for (let i = 0; i < c1Requests; i++) {
      straight.push(await direct());
      via.push((await streamChat(url, payload, agent)).ttftMs);
    }
    agent.destroy();
    return { viaFrontend: median(via), direct: median(straight) };
  } finally {
    await runtime.shutdown();
  }
}

/** Section 4: the canned stream on fastify and on node:http, interleaved over the rounds. */
async function frameworkCheck(payload: string): Promise<Frontend[]> {
  const servers: Frontend[] = [];
  for (const kind of ['fastify', 'node:http']) {
    const port = await freePort();
    const child = startChild(
      process.execPath,
      ['--import', 'tsx', join(packageDir, 'bench', 'sse-server.ts'), kind === 'fastify' ? 'fastify' : 'http', String(port), '32'],
      {},
      packageDir,
    );
    await child.waitForLine(/^listening$/);
    servers.push({ name: kind, url: `http://127.0.0.1:${port}`, child, freshConnections: false, rssIdle: rssMiB(child.child.pid!), rows: [] });
  }
  try {
    for (const server of servers) await ttftC1(server, payload);
    // These loads are short, so there are more rounds, in alternating order: one server going
    // first every time would take the drift of each round on one side.
    for (let round = 0; round < rounds * 3; round++) {
      for (const server of round % 2 ? [...servers].reverse() : servers)
        server.rows.push(await load(server.name, server.url, server.child.child.pid!, payload, false, c64Requests * 2));
    }
  } finally {
    for (const server of servers) server.child.kill();
  }
  return servers;
}

const f = (x: number, digits = 0) => x.toFixed(digits);
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

/** The medians over the rounds of one frontend's loads on one kind of connection. */
function summary(fe: Frontend, connections: string) {
  const rows = fe.rows.filter((r) => r.connections === connections);
  if (rows.length === 0) return undefined;
  return {
    tokensPerSec: median(rows.map((r) => r.tokensPerSec)),
    cpuMsPerRequest: median(rows.map((r) => r.cpuMsPerRequest)),
    ttftP50: median(rows.map((r) => r.ttftP50)),
    clientCpuPct: median(rows.map((r) => r.clientCpuPct)),
    rssPeak: Math.max(...rows.map((r) => r.rssPeak)),
  };
}

const loopback = { DYN_TCP_RPC_HOST: '127.0.0.1', DYN_TCP_RESPONSE_STREAM_HOST: '127.0.0.1' };
const deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, loopback);
try {
  const model = await LocalModel.load(modelDir);
  const preprocessor = await Preprocessor.create(
    model,
    buildCard(model, { modelName: MODEL, modelInput: ModelInput.Tokens, modelType: ModelType.Chat | ModelType.Completions }),
  );
  const body = {
    model: MODEL,
    messages: [{ role: 'user', content: userMessage(preprocessor) }],
    max_tokens: OSL,
    min_tokens: OSL,
    ignore_eos: true,
    stream: true,
    stream_options: { include_usage: true },
  };
  const payload = JSON.stringify(body);
  const promptTokens = (await preprocessor.preprocessChat(body)).request.token_ids.length;

  deployment.sampleWorker(['--model-name', MODEL, '--component', COMPONENT, '--delay-ms', '0', '--disable-kv-routing']);
  const ours = await deployment.frontend([], { DYN_LOG: 'info' });
  const frontends: Frontend[] = [{ name: 'ours (TypeScript)', url: ours.url, child: ours.child, freshConnections: true, rssIdle: 0, rows: [] }];
  const stock = stockPython();
  if ('skip' in stock) console.log(`stock frontend: not measured (${stock.skip})`);
  else {
    for (const level of ['info', 'warn']) {
      const port = await freePort();
      const args = ['-m', 'dynamo.frontend', '--http-host', '127.0.0.1', '--http-port', String(port), '--discovery-backend', 'file', '--request-plane', 'tcp'];
      const child = deployment.stockProcess(stock.python, args, { DYN_LOG: level });
      frontends.push({
        name: `stock 1.6.1 (DYN_LOG=${level})`,
        url: `http://127.0.0.1:${port}`,
        child,
        freshConnections: level === 'info',
        rssIdle: 0,
        rows: [],
      });
    }
  }
  for (const fe of frontends) await ready(fe, payload);

  const overhead = await overheadC1(ours.url, deployment, preprocessor, body);
  for (const fe of frontends) if (fe.freshConnections) await ttftC1(fe, payload);
  for (let round = 0; round < rounds; round++) {
    for (const fresh of [false, true]) {
      for (const fe of frontends) {
        if (fresh && !fe.freshConnections) continue;
        fe.rows.push(await load(fe.name, fe.url, fe.child.child.pid!, payload, fresh, c64Requests));
      }
    }
  }

  console.log(`\n1. frontend overhead at concurrency 1 (chat, ${promptTokens} prompt tokens, ${OSL} streamed, ${c1Requests} interleaved pairs, p50 TTFT):`);
  console.log(`   direct runtime-client call ${f(overhead.direct, 2)} ms, through dynamo-frontend ${f(overhead.viaFrontend, 2)} ms`);
  const added = overhead.viaFrontend - overhead.direct;
  console.log(`   added by the frontend: ${f(added, 2)} ms (target <= 1 ms -> ${verdict(added <= 1)})`);

  console.log(
    `\n2. concurrency ${CONCURRENCY}, ${OSL}-token streamed chat, one sample worker at --delay-ms 0, medians of ${rounds} interleaved rounds of ${c64Requests} requests:`,
  );
  console.log('frontend                   connections       out tok/s  fe CPU ms/req  TTFT p50 ms  client CPU %  RSS idle  RSS peak  c=1 TTFT p50');
  for (const fe of frontends) {
    for (const connections of ['keep-alive', 'new per request']) {
      const m = summary(fe, connections);
      if (!m) continue;
      const c1 = fe.ttftC1 ? `${f(connections === 'keep-alive' ? fe.ttftC1.keepAlive : fe.ttftC1.fresh, 2)} ms` : '-';
      console.log(
        `${fe.name.padEnd(26)} ${connections.padEnd(16)} ${f(m.tokensPerSec).padStart(10)} ${f(m.cpuMsPerRequest, 2).padStart(14)} ${f(m.ttftP50, 1).padStart(12)} ${f(m.clientCpuPct).padStart(12)} ${f(fe.rssIdle).padStart(5)} MiB ${f(m.rssPeak).padStart(5)} MiB  ${c1}`,
      );
    }
  }
  const [mine, ...theirs] = frontends;
  for (const other of theirs) {
    for (const connections of ['keep-alive', 'new per request']) {
      const a = summary(mine!, connections);
      const b = summary(other, connections);
      if (!a || !b) continue;
      const speed = a.tokensPerSec / b.tokensPerSec;
      const cpu = a.cpuMsPerRequest / b.cpuMsPerRequest;
      console.log(
        `   vs ${other.name}, ${connections}: output tokens/s ${f(speed, 2)}x (target >= 1.0x -> ${verdict(speed >= 1)}), frontend CPU ms/request ${f(cpu, 2)}x (target <= 1.0x -> ${verdict(cpu <= 1)})`,
      );
    }
    console.log(
      `   vs ${other.name}: RSS idle ${f(mine!.rssIdle / other.rssIdle, 2)}x, under load ${f(summary(mine!, 'keep-alive')!.rssPeak / summary(other, 'keep-alive')!.rssPeak, 2)}x`,
    );
  }

  const [onFastify, onHttp] = await frameworkCheck(payload);
  const [a, b] = [summary(onFastify!, 'keep-alive')!, summary(onHttp!, 'keep-alive')!];
  console.log(
    `\n4. fastify vs node:http, the same canned 256-token SSE stream in 32 events, concurrency ${CONCURRENCY}, keep-alive, medians of ${rounds * 3} rounds:`,
  );
  for (const [server, m] of [
    [onFastify!, a],
    [onHttp!, b],
  ] as const) {
    console.log(
      `   ${server.name.padEnd(10)} ${f(m.tokensPerSec).padStart(8)} tokens/s  ${f(m.cpuMsPerRequest, 3)} CPU ms/request  c=1 TTFT p50 ${f(server.ttftC1!.keepAlive, 3)} ms`,
    );
  }
  const kept = a.tokensPerSec / b.tokensPerSec;
  console.log(`   fastify keeps ${f(kept * 100, 1)}% of node:http's streamed tokens/s (keep fastify unless below 90% -> ${verdict(kept >= 0.9)})`);
  // A canned stream's whole c=1 TTFT is the two loopback HTTP hops that section 1 adds to a direct call.
  console.log(`   the HTTP hops alone (c=1 TTFT of the canned fastify server) take ${f(onFastify!.ttftC1!.keepAlive, 2)} ms of section 1's overhead`);
} finally {
  await deployment.stop();
}

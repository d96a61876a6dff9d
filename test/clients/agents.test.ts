// The coding agents people point at a self-hosted server, the real CLIs at pinned versions
// (@dynamo/testing/agent-clis), each with its default settings, against our dynamo-frontend in
// front of the scripted agent engine (agent-engine.ts, Qwen3's template with hermes tool calls):
// Claude Code over the Anthropic Messages API, Codex CLI over the Responses API, OpenCode over
// chat completions. Each runs a real tool (its own shell tool, `echo hello-from-tool`) and reports
// what it printed; each answers a plain question; each prints a 400 legibly. Two workers behind
// the KV router with session affinity: an agent's session stays on one worker, and each turn's
// prompt starts with the last one's. Then every request the agents sent is replayed to stock
// 1.6.1's frontend beside ours: wherever stock answers, the prompts are the same tokens.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream } from 'node:stream/web';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { AGENTS, type AgentName, agentClis, runAgent } from '@dynamo/testing/agent-clis';
import type { Child } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { type Frontend, InteropStack } from '@dynamo/testing/interop-stack';
import { modelDir, waitForModel } from '@dynamo/testing/frontend-stack';
import { stockPython } from '@dynamo/testing/stock-dynamo';

import { PLAIN_ANSWER, TOOL_COMMAND } from './agent-script.js';

const MODEL = 'qwen3-agent';
const TOOL_PROMPT = `Run \`${TOOL_COMMAND}\` in the shell and tell me what it printed.`;
const clis = agentClis();
const stock = stockPython();

/** A request an agent sent, as the proxy in front of our frontend saw it. */
interface Sent {
  agent: AgentName;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A request's headers as they go on to another server: without those of its own connection. */
const forwarded = (headers: IncomingHttpHeaders) =>
  Object.fromEntries(Object.entries(headers).filter(([k]) => !['host', 'content-length', 'accept-encoding', 'connection'].includes(k))) as Record<
    string,
    string
  >;

/**
 * A proxy in front of a frontend that records every request and passes it on (the response
 * streamed back as it comes); `corrupt` rewrites a JSON body on its way, to make a bad request.
 */
class RecordingProxy {
  readonly sent: Sent[] = [];
  agent: AgentName = 'claude';
  corrupt: ((body: Record<string, unknown>) => void) | undefined;
  readonly #server: Server;

  constructor(target: string) {
    this.#server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      let body = Buffer.concat(chunks).toString('utf8');
      if (!this.corrupt) this.sent.push({ agent: this.agent, method: req.method!, path: req.url!, headers: req.headers, body });
      else if (body !== '') {
        const json = JSON.parse(body) as Record<string, unknown>;
        this.corrupt(json);
        body = JSON.stringify(json);
      }
      const answer = await fetch(`${target}${req.url}`, {
        method: req.method!,
        headers: forwarded(req.headers),
        ...(req.method !== 'GET' && req.method !== 'HEAD' && { body }),
      });
      res.writeHead(
        answer.status,
        Object.fromEntries([...answer.headers].filter(([k]) => !['content-length', 'content-encoding', 'transfer-encoding', 'connection'].includes(k))),
      );
      if (answer.body) Readable.fromWeb(answer.body as ReadableStream).pipe(res);
      else res.end();
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    const address = this.#server.address() as { port: number };
    return `http://127.0.0.1:${address.port}`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

let stack: InteropStack;
let ours: Frontend;
let stockFrontend: Frontend;
let proxy: RecordingProxy;
let proxyUrl = '';
const workers: Array<{ child: Child; prompts: string }> = [];

/** The prompts (token ids) the workers got since `marks`, per worker. */
function promptsSince(marks: number[]): number[][][] {
  return workers.map((w, i) =>
    readdirSync(w.prompts)
      .map((f) => Number.parseInt(f, 10))
      .filter((n) => n >= marks[i]!)
      .sort((a, b) => a - b)
      .map((n) => (JSON.parse(readFileSync(join(w.prompts, `${n}.json`), 'utf8')) as { token_ids: number[] }).token_ids),
  );
}
const marks = () => workers.map((w) => readdirSync(w.prompts).length);
const commonPrefix = (a: number[], b: number[]) => {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
};

const ready = 'bin' in clis && 'python' in stock;
beforeAll(async () => {
  if (!ready) return;
  stack = await InteropStack.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, stock.python);
  for (let i = 0; i < 2; i++) {
    const prompts = mkdtempSync(join(tmpdir(), 'agent-prompts-'));
    const child = stack.deployment.nodeProcess([
      '--import',
      'tsx',
      new URL('./agent-engine.ts', import.meta.url).pathname,
      '--model-path',
      modelDir,
      '--model-name',
      MODEL,
      '--component',
      'agent',
      '--dyn-tool-call-parser',
      'hermes',
      '--prompts-dir',
      prompts,
    ]);
    workers.push({ child, prompts });
  }
  [ours, stockFrontend] = await Promise.all([
    stack.ourFrontend(['--enable-anthropic-api', '--router-mode', 'kv', '--router-session-affinity-ttl-secs', '300']),
    stack.stockFrontend(['--enable-anthropic-api']),
  ]);
  await waitForModel(ours.url, MODEL, 'agent', 2, 60_000);
  await waitForModel(stockFrontend.url, MODEL, 'agent', 2, 120_000);
  proxy = new RecordingProxy(ours.url);
  proxyUrl = await proxy.listen();
}, 300_000);
afterAll(async () => {
  await proxy?.close();
  await stack?.deployment.stop();
});

describe.skipIf(!ready)('coding agents with their default settings through our frontend', () => {
  it.each(AGENTS)('%s runs its shell tool and reports what it printed, every turn of the session on one worker', async (agent) => {
    proxy.agent = agent;
    const before = marks();
    const run = await runAgent((clis as { bin: string }).bin, agent, { url: proxyUrl, model: MODEL }, TOOL_PROMPT);
    expect(run.code, run.report()).toBe(0);
    expect(run.stdout, run.report()).toContain('done: hello-from-tool');
    // The session's turns: the tool call, then the answer from its result (plus any side request
    // of the agent's own, such as OpenCode's title), all on the worker the session was bound to.
    const seen = promptsSince(before);
    expect(seen.filter((p) => p.length > 0).length, `prompts per worker: ${seen.map((p) => p.length)}`).toBe(1);
    const turns = seen.find((p) => p.length > 0)!;
    const [first, last] = [turns.at(-2)!, turns.at(-1)!];
    // The tool round's prompt is the first turn's prompt with the call and its result appended.
    expect(commonPrefix(first, last)).toBeGreaterThanOrEqual(first.length - 8);
  });

  it.each(AGENTS)('%s answers a plain question', async (agent) => {
    proxy.agent = agent;
    const run = await runAgent((clis as { bin: string }).bin, agent, { url: proxyUrl, model: MODEL }, 'Say hello.');
    expect(run.code, run.report()).toBe(0);
    expect(run.stdout, run.report()).toContain(PLAIN_ANSWER);
  });
});

/** What each agent sends that no frontend can serve, made by rewriting one of its requests. */
const BREAKS: Record<AgentName, { what: string; corrupt: (body: Record<string, unknown>) => void; says: RegExp }> = {
  claude: {
    what: 'a tool of an unknown type',
    corrupt: (b) => (b.tools as unknown[]).push({ type: 'teleport_20990101', name: 'teleport' }),
    says: /API Error: 400 request\.tools\.\d+\.type: /,
  },
  codex: {
    what: 'a tool of an unknown type',
    corrupt: (b) => (b.tools as unknown[]).push({ type: 'teleport' }),
    says: /request\.tools\.\d+\.type: must be a function, namespace or custom tool/,
  },
  opencode: {
    what: 'a malformed message',
    corrupt: (b) => (b.messages as unknown[]).push({ role: 'wizard', content: 'abracadabra' }),
    says: /request\.messages\.\d+\.role/,
  },
};

describe.skipIf(!ready)('a request no frontend can serve', () => {
  afterAll(() => {
    proxy.corrupt = undefined;
  });

  it.each(AGENTS)('%s prints the 400 and its message, and exits with an error', async (agent) => {
    const broken = BREAKS[agent];
    proxy.agent = agent;
    proxy.corrupt = (body) => (body.tools || body.messages) && broken.corrupt(body);
    const run = await runAgent((clis as { bin: string }).bin, agent, { url: proxyUrl, model: MODEL }, 'Say hello.');
    console.log(`${agent} given ${broken.what}:\n${run.report()}`);
    expect(run.code, run.report()).not.toBe(0);
    expect(run.stdout + run.stderr, run.report()).toMatch(broken.says);
  });
});

/**
 * The requests to replay: each as the agent sent it and, for a Responses request with tools stock
 * refuses (Codex's web_search and multi_agent_v1 namespace), as Codex sends it with those turned
 * off (`-c web_search="disabled" -c features.multi_agent=false`), which stock takes.
 */
function replays(sent: Sent): Array<{ label: string; body: string }> {
  const out = [{ label: 'as sent', body: sent.body }];
  const body = JSON.parse(sent.body) as { tools?: Array<{ type: string }> };
  if (sent.path === '/v1/responses' && body.tools?.some((t) => t.type !== 'function')) {
    out.push({ label: 'without web_search and multi_agent', body: JSON.stringify({ ...body, tools: body.tools.filter((t) => t.type === 'function') }) });
  }
  return out;
}

/** Why stock 1.6.1 refuses what it refuses of these requests (each a known failure of stock's). */
const STOCK_REFUSALS = [
  // Claude Code's tool round: its assistant turn of only tool_use becomes content null, which Qwen3's template cannot render.
  /^claude .*: stock 400: .*"Invalid request"/,
  // Codex's web_search tool (and its multi_agent_v1 namespace) on every turn.
  /^codex .* as sent: stock 400: .*Unsupported Responses tools type 'web_search'/,
  // Codex's tool round: the function_call item with no text before it, content null as for Claude.
  /^codex .* without web_search and multi_agent: stock 400: .*"Invalid request"/,
];

describe.skipIf(!ready)("the agents' requests through stock 1.6.1's frontend", () => {
  it('render to the same prompt tokens wherever stock answers them', async () => {
    const outcomes: string[] = [];
    for (const sent of proxy.sent.filter((s) => s.method === 'POST')) {
      const headers = forwarded(sent.headers);
      for (const { label, body } of replays(sent)) {
        const replay = async (base: string) => {
          const before = marks();
          const res = await fetch(`${base}${sent.path}`, { method: 'POST', headers, body });
          const text = await res.text();
          if (res.status !== 200) return { status: res.status, text };
          return { status: 200, text, prompt: await waitFor('the worker to get the prompt', () => promptsSince(before).flat().at(0)) };
        };
        const [mine, theirs] = [await replay(ours.url), await replay(stockFrontend.url)];
        expect(mine.status, mine.text).toBe(200);
        const same = theirs.prompt !== undefined && mine.prompt!.length === theirs.prompt.length && mine.prompt!.every((t, i) => t === theirs.prompt![i]);
        const outcome =
          theirs.status !== 200
            ? `stock ${theirs.status}: ${theirs.text.slice(0, 200)}`
            : same
              ? `same ${mine.prompt!.length} tokens`
              : `differ: ours ${mine.prompt!.length}, stock ${theirs.prompt!.length} tokens`;
        outcomes.push(`${sent.agent} ${sent.path} ${label}: ${outcome}`);
      }
    }
    console.log(outcomes.join('\n'));
    expect(outcomes.filter((o) => !o.includes(': same ') && !STOCK_REFUSALS.some((r) => r.test(o)))).toEqual([]);
    // Each agent's first turn is one stock answers.
    for (const agent of AGENTS)
      expect(outcomes.filter((o) => o.startsWith(`${agent} `) && o.includes(': same ')).length, outcomes.join('\n')).toBeGreaterThan(0);
  });
});

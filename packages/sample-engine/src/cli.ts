#!/bin/sh
//bin/true; export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"; exec node --max-semi-space-size=4 "$0" "$@"
// Run as a program, sh reads the line above: at most two malloc arenas, a young generation of at most
// 2 x 4 MiB (see @dynamo/backend's README, "Memory"). To JavaScript it is a comment, and `node cli.js` skips it.
import { conformanceReport, Context, DynamoException, type Flags, parseFlags, run, toDynamoException } from '@dynamo/backend';
import { z } from 'zod';
import { SampleEngine, sampleEngineOptions } from './engine.js';
import { sampleEngineFlags, sampleEngineHelp } from './settings.js';
import { formatConformanceReport } from './report.js';

const commands = {
  serve: 'Serve the engine as a Dynamo worker until SIGTERM/SIGINT (the default when no command is given)',
  conformance: 'Run the conformance kit against the sample engine and print a report (exit 1 if it fails)',
  generate: 'Run one request through the engine locally and print its chunks as JSON lines',
} as const;

type Command = keyof typeof commands;

function usage(): string {
  const list = Object.entries(commands)
    .map(([name, text]) => `  ${name.padEnd(12)}${text}`)
    .join('\n');
  return sampleEngineHelp(
    'dynamo-sample-engine [command] [options]',
    `Sample Dynamo backend: emits rotating token ids (1, 2, 3, ...), no model weights needed. Serving registers\nthe model card of --model-path (a folder with tokenizer.json, a .gguf file or a Hugging Face id) under\n--model-name, so a Dynamo frontend can tokenize for it.\n\nCommands:\n${list}\n\nThe generate command also takes --token-ids LIST (default 1,2,3). Runtime settings come from DYN_* and\nETCD_*/NATS_* variables (DYN_SYSTEM_PORT for /health and /metrics, DYN_WORKER_GRACEFUL_SHUTDOWN_TIMEOUT, ...).`,
  );
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h') {
    process.stdout.write(usage());
    return 0;
  }
  // No command (or options only) serves, like Dynamo's sample_main.
  if (command === undefined || command.startsWith('-')) return run(SampleEngine, argv);
  if (!(command in commands)) {
    process.stderr.write(`dynamo-sample-engine: unknown command '${command}' (expected one of: ${Object.keys(commands).join(', ')}; see --help)\n`);
    return 2;
  }
  switch (command as Command) {
    case 'serve':
      return run(SampleEngine, rest);
    case 'conformance':
      return conformance(rest);
    default:
      return generate(rest);
  }
}

const generateFlags = {
  ...sampleEngineFlags,
  tokenIds: {
    schema: z
      .string()
      .default('1,2,3')
      .transform((list) => list.split(',').map((t) => Number(t.trim())))
      .pipe(z.array(z.uint32(), { error: 'expected comma-separated token ids' }).min(1)),
    description: 'Prompt token ids for the generate command',
    placeholder: 'LIST',
  },
} satisfies Flags;

async function conformance(argv: string[]): Promise<number> {
  const parsed = parseFlags(sampleEngineFlags, argv, process.env);
  if (parsed.help) {
    process.stdout.write(usage());
    return 0;
  }
  const options = sampleEngineOptions(parsed.values);
  // An encode worker is held to the encode handoff rules.
  const encoder = options.disaggregationMode === 'encode';
  const report = await conformanceReport(() => new SampleEngine(options), encoder ? { mode: 'encode' } : {});
  const role = encoder ? 'an encode worker, checked by the encode handoff rules' : `${options.delayMs} ms/token, max ${options.maxTokens} tokens`;
  const title = `Conformance of the sample engine (model ${options.modelName}, ${role}):`;
  process.stdout.write(formatConformanceReport(title, report));
  return report.passed ? 0 : 1;
}

async function generate(argv: string[]): Promise<number> {
  const parsed = parseFlags(generateFlags, argv, process.env);
  if (parsed.help) {
    process.stdout.write(usage());
    return 0;
  }
  const engine = new SampleEngine(sampleEngineOptions(parsed.values));
  await engine.start(0n);
  try {
    const context = new Context();
    process.once('SIGINT', () => context.stopGenerating());
    for await (const chunk of engine.generate({ token_ids: parsed.values.tokenIds }, context)) {
      process.stdout.write(`${JSON.stringify(chunk)}\n`);
    }
  } finally {
    await engine.cleanup();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    const error = err instanceof DynamoException ? err : toDynamoException(err);
    process.stderr.write(`dynamo-sample-engine: ${error.name}: ${error.message}\n`);
    process.exitCode = error.kind === 'InvalidArgument' ? 2 : 1;
  },
);

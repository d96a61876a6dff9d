import { setTimeout as sleep } from 'node:timers/promises';
import {
  type Context,
  type EngineConfig,
  engineLog,
  formatHelp,
  type GenerateChunk,
  type GenerateRequest,
  InvalidArgument,
  LLMEngine,
  parseFlags,
  usage,
  type WorkerConfig,
  workerConfigFromFlags,
  workerFlags,
} from '@dynamo/backend';
import { z } from 'zod';

const log = engineLog('echo');

/** The echo engine's options plus every worker's common ones (`--namespace`, `--model-path`, ...). */
const flags = {
  modelPath: {
    schema: z.string().min(1, 'give the model folder, .gguf file or Hugging Face id'),
    description: 'Model whose tokenizer frontends use',
    placeholder: 'PATH',
  },
  modelName: { schema: z.string().min(1).default('echo'), description: 'Name clients ask for', placeholder: 'NAME' },
  tokensPerChunk: { schema: z.coerce.number().int().min(1).default(4), description: 'Tokens per chunk', placeholder: 'N' },
  pauseMs: { schema: z.coerce.number().min(0).default(2), description: 'Pause between chunks, in ms', placeholder: 'MS' },
  ...workerFlags,
};

export interface EchoEngineOptions {
  /** Tokens emitted per chunk. */
  tokensPerChunk?: number;
  /** Pause between chunks, in ms. */
  pauseMs?: number;
}

/**
 * Echoes the prompt back, cycling through it until `max_tokens` (default: the prompt length).
 * Chunks carry up to `tokensPerChunk` tokens; a stop interrupts the pause immediately through
 * `context.signal` instead of waiting for it to elapse.
 */
export class EchoEngine extends LLMEngine {
  readonly #tokensPerChunk: number;
  readonly #pauseMs: number;
  #inflight = new Set<string>();
  #running = false;

  constructor(options: EchoEngineOptions = {}) {
    super();
    this.#tokensPerChunk = options.tokensPerChunk ?? 4;
    this.#pauseMs = options.pauseMs ?? 2;
  }

  /** `--model-path` is required; everything else has a default. */
  static override async fromArgs(argv: string[] = process.argv.slice(2)): Promise<[EchoEngine, WorkerConfig]> {
    const parsed = parseFlags(flags, argv, process.env);
    if (parsed.help) {
      process.stdout.write(formatHelp('echo-engine [options]', 'Echoes each prompt back through Dynamo.', flags));
      process.exit(0);
    }
    const { modelPath, modelName, tokensPerChunk, pauseMs, ...common } = parsed.values;
    const config = workerConfigFromFlags(common, { modelName: modelPath, servedModelName: modelName });
    return [new EchoEngine({ tokensPerChunk, pauseMs }), config];
  }

  override async start(_workerId: bigint): Promise<EngineConfig> {
    this.#running = true;
    return { model: 'echo', llm: { contextLength: 8192, kvCacheBlockSize: 16 } };
  }

  override async abort(context: Context): Promise<void> {
    log.debug({ id: context.id() }, 'request aborted');
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    if (!this.#running) throw new InvalidArgument('EchoEngine.generate() called before start()');
    const prompt = request.token_ids;
    if (prompt.length === 0) throw new InvalidArgument('token_ids must not be empty');
    const budget = request.stop_conditions?.max_tokens ?? prompt.length;
    this.#inflight.add(context.id());
    let sent = 0;
    try {
      while (sent < budget) {
        if (context.isStopped()) break;
        try {
          await sleep(this.#pauseMs, undefined, { signal: context.signal });
        } catch {
          break; // stopped while pausing
        }
        const n = Math.min(this.#tokensPerChunk, budget - sent);
        const tokens = Array.from({ length: n }, (_, i) => prompt[(sent + i) % prompt.length]!);
        sent += n;
        if (sent === budget) {
          yield { token_ids: tokens, finish_reason: 'length', completion_usage: usage(prompt.length, sent) };
          return;
        }
        yield { token_ids: tokens };
      }
      yield { token_ids: [], finish_reason: 'cancelled', completion_usage: usage(prompt.length, sent) };
    } finally {
      this.#inflight.delete(context.id());
    }
  }

  /** Requests still streaming (for observability in tests). */
  get inflight(): number {
    return this.#inflight.size;
  }

  override async cleanup(): Promise<void> {
    this.#running = false;
  }
}

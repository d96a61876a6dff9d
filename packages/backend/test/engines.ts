// Engines for the conformance tests: one that follows the contract, and one broken subclass per
// failure kind the kit reports.
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CONFORMANCE_CHECKS,
  type Context,
  type EngineConfig,
  type GenerateChunk,
  type GenerateRequest,
  type KvEventSource,
  LLMEngine,
  RawEngine,
  type RawObject,
  usage,
} from '../src/index.js';

export class GoodEngine extends LLMEngine {
  started = false;
  cleanups = 0;
  delayMs = 1;

  override async start(_workerId: bigint): Promise<EngineConfig> {
    this.started = true;
    return { model: 'good-model', llm: { kvCacheBlockSize: 16 } };
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    const max = request.stop_conditions?.max_tokens ?? 4;
    const prompt = request.token_ids.length;
    for (let i = 0; i < max; i++) {
      if (context.isStopped()) {
        yield { token_ids: [], finish_reason: 'cancelled', completion_usage: usage(prompt, i) };
        return;
      }
      await sleep(this.delayMs);
      yield i === max - 1 ? { token_ids: [i + 1], finish_reason: 'length', completion_usage: usage(prompt, max) } : { token_ids: [i + 1] };
    }
  }

  override async cleanup(): Promise<void> {
    if (this.started) this.cleanups++;
    this.started = false;
  }
}

export const broken: Record<string, () => LLMEngine> = {
  StartFailed: () =>
    new (class extends GoodEngine {
      override async start(): Promise<EngineConfig> {
        throw new Error('weights not found');
      }
    })(),
  EmptyModelInConfig: () =>
    new (class extends GoodEngine {
      override async start(): Promise<EngineConfig> {
        return { model: '' };
      }
    })(),
  KvEventSourcesFailed: () =>
    new (class extends GoodEngine {
      override async kvEventSources(): Promise<KvEventSource[]> {
        throw new Error('zmq socket refused');
      }
    })(),
  KvEventSourcesNotIdempotent: () =>
    new (class extends GoodEngine {
      calls = 0;
      override async kvEventSources(): Promise<KvEventSource[]> {
        this.calls++;
        return [{ kind: 'zmq', endpoint: 'tcp://127.0.0.1:5557', dpRank: this.calls }];
      }
    })(),
  SetupMetricsFailed: () =>
    new (class extends GoodEngine {
      override componentMetricsDpRanks(): number[] {
        throw new Error('metrics registry is closed');
      }
    })(),
  ComponentMetricsNotIdempotent: () =>
    new (class extends GoodEngine {
      calls = 0;
      override componentMetricsDpRanks(): number[] {
        this.calls++;
        return Array.from({ length: this.calls }, (_, i) => i);
      }
    })(),
  GenerateFailed: () =>
    new (class extends GoodEngine {
      override generate(): AsyncGenerator<GenerateChunk> {
        throw new RangeError('scheduler is full');
      }
    })(),
  NoChunksYielded: () =>
    new (class extends GoodEngine {
      override async *generate(): AsyncGenerator<GenerateChunk> {}
    })(),
  ChunkAfterTerminal: () =>
    new (class extends GoodEngine {
      override async *generate(): AsyncGenerator<GenerateChunk> {
        yield { token_ids: [1], finish_reason: 'stop', completion_usage: usage(3, 1) };
        yield { token_ids: [2] };
      }
    })(),
  NoTerminalChunk: () =>
    new (class extends GoodEngine {
      override async *generate(): AsyncGenerator<GenerateChunk> {
        yield { token_ids: [1] };
        yield { token_ids: [2] };
      }
    })(),
  StreamYieldedError: () =>
    new (class extends GoodEngine {
      override async *generate(): AsyncGenerator<GenerateChunk> {
        yield { token_ids: [1] };
        throw new Error('CUDA error: device-side assert triggered');
      }
    })(),
  CompletionTokensMismatch: () =>
    new (class extends GoodEngine {
      override async *generate(): AsyncGenerator<GenerateChunk> {
        yield { token_ids: [1] };
        yield { token_ids: [2], finish_reason: 'length', completion_usage: usage(3, 5) };
      }
    })(),
  ConcurrentGenerateFailed: () =>
    new (class extends GoodEngine {
      active = 0;
      override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
        // A single shared decode slot: a second concurrent request silently gets nothing.
        if (this.active > 0) return;
        this.active++;
        try {
          yield* super.generate(request, context);
        } finally {
          this.active--;
        }
      }
    })(),
  CancellationNotObserved: () =>
    new (class extends GoodEngine {
      override async *generate(request: GenerateRequest): AsyncGenerator<GenerateChunk> {
        const max = request.stop_conditions?.max_tokens ?? 4;
        for (let i = 0; i < max; i++) {
          await sleep(5);
          yield i === max - 1 ? { token_ids: [1], finish_reason: 'length', completion_usage: usage(3, max) } : { token_ids: [1] };
        }
      }
    })(),
  CancellationIgnored: () =>
    new (class extends GoodEngine {
      override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
        if (context.isStopped()) {
          yield { token_ids: [], finish_reason: 'stop', completion_usage: usage(3, 0) };
          return;
        }
        yield* super.generate(request, context);
      }
    })(),
  CleanupFailed: () =>
    new (class extends GoodEngine {
      override async cleanup(): Promise<void> {
        throw new Error('device busy');
      }
    })(),
  SecondCleanupFailed: () =>
    new (class extends GoodEngine {
      torn = false;
      override async cleanup(): Promise<void> {
        if (this.torn) throw new Error('NCCL group already destroyed');
        this.torn = true;
      }
    })(),
  CleanupWithoutStartFailed: () =>
    new (class extends GoodEngine {
      model: { free(): void } | undefined;
      torn = false;
      override async start(workerId: bigint): Promise<EngineConfig> {
        this.model = { free() {} };
        return super.start(workerId);
      }
      override async cleanup(): Promise<void> {
        // Idempotent, but not null-safe: assumes start() ran.
        if (this.torn) return;
        (this.model as { free(): void }).free();
        this.torn = true;
      }
    })(),
  CheckTimedOut: () =>
    new (class extends GoodEngine {
      // One token, then it waits for something that never comes.
      override async *generate(): AsyncGenerator<GenerateChunk> {
        yield { token_ids: [1] };
        await new Promise(() => {});
      }
    })(),
};

/** An encode worker's engine: each request is answered by one handoff chunk. */
export class GoodEncoder extends LLMEngine {
  override async start(_workerId: bigint): Promise<EngineConfig> {
    return { model: 'good-encoder' };
  }

  override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
    if (context.isStopped()) {
      yield { token_ids: [], finish_reason: 'cancelled', completion_usage: usage(request.token_ids.length, 0) };
      return;
    }
    await sleep(1);
    yield this.handoff(request);
  }

  handoff(request: GenerateRequest): GenerateChunk {
    const images = (request.multi_modal_data?.image as unknown[] | undefined)?.length ?? 0;
    return { token_ids: [], finish_reason: 'stop', completion_usage: usage(request.token_ids.length, 0), encoder_result: { images } };
  }

  override async cleanup(): Promise<void> {}
}

/** One broken encoder per encode failure kind (checked with `mode: 'encode'`). */
export const brokenEncoders: Record<string, () => LLMEngine> = {
  EncodeChunkCount: () =>
    new (class extends GoodEncoder {
      override handoff(request: GenerateRequest): GenerateChunk {
        return { ...super.handoff(request), encoder_result: { images: 1, part: 1 } };
      }
      override async *generate(request: GenerateRequest, context: Context): AsyncGenerator<GenerateChunk> {
        yield { token_ids: [] };
        yield* super.generate(request, context);
      }
    })(),
  EncodeTerminalExpected: () =>
    new (class extends GoodEncoder {
      override handoff(request: GenerateRequest): GenerateChunk {
        return { ...super.handoff(request), finish_reason: 'length' };
      }
    })(),
  EncodeTokensNotEmpty: () =>
    new (class extends GoodEncoder {
      override handoff(request: GenerateRequest): GenerateChunk {
        return { ...super.handoff(request), token_ids: [7] };
      }
    })(),
  EncoderResultExpectedObject: () =>
    new (class extends GoodEncoder {
      override handoff(request: GenerateRequest): GenerateChunk {
        const { encoder_result: _dropped, ...chunk } = super.handoff(request);
        return chunk;
      }
    })(),
  EncodeUsageMismatch: () =>
    new (class extends GoodEncoder {
      override handoff(request: GenerateRequest): GenerateChunk {
        return { ...super.handoff(request), completion_usage: usage(request.token_ids.length, 1) };
      }
    })(),
};

/** A raw media engine: `steps` (default 2) objects per request, 1 ms apart; it keeps the requests it saw. */
export class GoodRawEngine extends RawEngine {
  readonly requests: RawObject[] = [];

  override async start(_workerId: bigint): Promise<EngineConfig> {
    return { model: 'good-diffusion' };
  }

  override async *generate(request: RawObject, context: Context): AsyncGenerator<RawObject> {
    this.requests.push(request);
    const steps = typeof request.steps === 'number' ? request.steps : 2;
    for (let step = 0; step < steps && !context.isStopped(); step++) {
      await sleep(1);
      yield { step, prompt: request.prompt };
    }
  }

  override async cleanup(): Promise<void> {}
}

/** The raw engine that breaks the raw-only rule. */
export const brokenRaw: Record<string, () => RawEngine> = {
  RawEngineAdvertisedLlmRegistration: () =>
    new (class extends GoodRawEngine {
      override async start(): Promise<EngineConfig> {
        return { model: 'good-diffusion', llm: { contextLength: 77 } };
      }
    })(),
};

/** The statuses of a run whose engine hung in `generate` (checks by name, in kit order). */
const generateAt = CONFORMANCE_CHECKS.indexOf('generate');
export const hungInGenerate = CONFORMANCE_CHECKS.map((name, i) => [name, i < generateAt ? 'passed' : i === generateAt ? 'failed' : 'skipped']);

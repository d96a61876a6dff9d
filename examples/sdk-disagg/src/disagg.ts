// Disaggregated serving in two services: Prefill runs the prompt through an engine in prefill
// mode (one token plus the state to hand over), then Decode continues from that state and
// streams the rest. Each is its own process (and Kubernetes component), so they scale apart.
//   dynamo-serve src/disagg.ts#Prefill
import { Context, type GenerateChunk, type GenerateRequest } from '@dynamo/backend';
import { SampleEngine } from '@dynamo/sample-engine';
import { depends, endpoint, onShutdown, onStart, service, serviceConfig } from '@dynamo/sdk';
import { z } from 'zod';

/** A token-level request, as a frontend's preprocessor sends it. */
export const TokenRequest = z.object({
  token_ids: z.array(z.number().int().nonnegative()).min(1),
  max_tokens: z.number().int().min(1).default(16),
  /** Set by Prefill on its way to Decode. */
  prefill_result: z.record(z.string(), z.unknown()).optional(),
});
export type TokenRequest = z.input<typeof TokenRequest>;

/** One streamed piece of the answer. */
export const TokenChunk = z.object({ token_ids: z.array(z.number().int()), finish_reason: z.string().nullish(), stage: z.enum(['prefill', 'decode']) });
export type TokenChunk = z.infer<typeof TokenChunk>;

function engineRequest(request: z.output<typeof TokenRequest>): GenerateRequest {
  return {
    token_ids: request.token_ids,
    stop_conditions: { max_tokens: request.max_tokens },
    ...(request.prefill_result && { prefill_result: request.prefill_result }),
  } as GenerateRequest;
}

@service({ dynamo: { namespace: 'disagg' }, workers: 2, resources: { gpu: 1, cpu: 4, memory: '16Gi' }, componentType: 'decode', config: { delayMs: 5 } })
export class Decode {
  private engine!: SampleEngine;

  @onStart
  async start(): Promise<void> {
    this.engine = new SampleEngine({ disaggregationMode: 'decode', delayMs: serviceConfig<{ delayMs: number }>(this).delayMs });
    await this.engine.start(0n);
  }

  @endpoint({ request: TokenRequest, response: TokenChunk })
  async *generate(request: z.output<typeof TokenRequest>): AsyncGenerator<TokenChunk> {
    for await (const chunk of this.engine.generate(engineRequest(request), new Context()) as AsyncIterable<GenerateChunk>) {
      const finish = chunk.finish_reason;
      yield {
        token_ids: chunk.token_ids,
        finish_reason: typeof finish === 'object' && finish !== null ? `error: ${finish.error}` : (finish ?? null),
        stage: 'decode',
      };
    }
  }

  @onShutdown
  async stop(): Promise<void> {
    await this.engine.cleanup();
  }
}

@service({ dynamo: { namespace: 'disagg' }, resources: { gpu: 1, cpu: 4, memory: '16Gi' }, componentType: 'prefill', config: { delayMs: 5 } })
export class Prefill {
  decode = depends(Decode);
  private engine!: SampleEngine;

  @onStart
  async start(): Promise<void> {
    this.engine = new SampleEngine({ disaggregationMode: 'prefill', delayMs: serviceConfig<{ delayMs: number }>(this).delayMs });
    await this.engine.start(0n);
  }

  @endpoint({ request: TokenRequest, response: TokenChunk })
  async *generate(request: z.output<typeof TokenRequest>): AsyncGenerator<TokenChunk> {
    let handover: Record<string, unknown> | undefined;
    for await (const chunk of this.engine.generate(engineRequest(request), new Context()) as AsyncIterable<GenerateChunk>) {
      handover = chunk.disaggregated_params ?? handover;
      yield { token_ids: [], finish_reason: null, stage: 'prefill' };
    }
    if (!handover) throw new Error('the prefill engine returned no disaggregated_params');
    yield* this.decode.generate({ token_ids: request.token_ids, max_tokens: request.max_tokens, prefill_result: handover });
  }

  @onShutdown
  async stop(): Promise<void> {
    await this.engine.cleanup();
  }
}

import { Context, parseOrThrow, toDynamoException } from '@dynamo/runtime';
import type { EngineFactory, LLMEngine } from '../engine.js';
import { engineConfigToWire } from '../protocol/engine-config.js';
import type { RawEngine, RawEngineFactory } from '../raw-engine.js';
import { kvEventSourcesToWire } from '../protocol/kv-events.js';
import { GenerateRequestSchema } from '../protocol/request.js';
import { StreamPump } from './stream-pump.js';

/** One operation sent by the native conformance kit (see crates/dynamo-napi/src/js_engine.rs). */
type Operation =
  | { op: 'start'; engine: number; worker_id: string }
  | { op: 'kv_event_sources'; engine: number }
  | { op: 'component_metrics_dp_ranks'; engine: number }
  | { op: 'generate'; engine: number; context: string; request: unknown }
  | { op: 'next'; stream: number }
  | { op: 'stop'; stream: number; kill: boolean }
  | { op: 'close'; stream: number }
  | { op: 'abort'; engine: number; context: string }
  | { op: 'cleanup'; engine: number };

interface OpenStream {
  pump: StreamPump<unknown>;
  context: Context;
}

/** The engines a bridge makes: token engines, or raw engines whose requests pass through as-is. */
export type BridgedFactory = { raw: false; factory: EngineFactory } | { raw: true; factory: RawEngineFactory };

/**
 * Adapts engines made by a factory to the native kit's `dispatch(json) => Promise<json>`
 * protocol. It only translates: calls the engine, converts its values to Dynamo's wire shapes
 * and turns thrown errors into `{error: {kind, message}}`. Every judgement is the kit's.
 */
export class EngineBridge {
  readonly #source: BridgedFactory;
  readonly #engines = new Map<number, Promise<LLMEngine | RawEngine>>();
  readonly #streams = new Map<number, OpenStream>();
  readonly #contexts = new Map<string, Context>();
  #nextStream = 1;

  constructor(source: BridgedFactory) {
    this.#source = source;
  }

  /** Handles one operation; never rejects (failures are replies). */
  readonly dispatch = async (message: string): Promise<string> => {
    try {
      const value = await this.#handle(JSON.parse(message) as Operation);
      return JSON.stringify({ ok: value ?? null });
    } catch (err) {
      const error = toDynamoException(err);
      return JSON.stringify({ error: { kind: error.kind, message: error.message } });
    }
  };

  /** Closes any stream the kit abandoned (for example after a cancellation deadline). */
  dispose(): void {
    for (const { pump } of this.#streams.values()) pump.close();
    this.#streams.clear();
    this.#contexts.clear();
  }

  async #handle(op: Operation): Promise<unknown> {
    switch (op.op) {
      case 'start':
        return engineConfigToWire(await (await this.#engine(op.engine)).start(BigInt(op.worker_id)));
      case 'kv_event_sources':
        return kvEventSourcesToWire(await (await this.#llmEngine(op.engine)).kvEventSources());
      case 'component_metrics_dp_ranks':
        return (await this.#llmEngine(op.engine)).componentMetricsDpRanks();
      case 'generate':
        return { stream: await this.#generate(op.engine, op.context, op.request) };
      case 'next':
        return this.#next(op.stream);
      case 'stop': {
        const open = this.#streams.get(op.stream);
        if (op.kill) open?.context.kill();
        else open?.context.stopGenerating();
        return null;
      }
      case 'close':
        this.#release(op.stream)?.pump.close();
        return null;
      case 'abort': {
        const context = this.#contexts.get(op.context) ?? new Context({ id: op.context });
        await (await this.#engine(op.engine)).abort(context);
        return null;
      }
      case 'cleanup':
        await (await this.#engine(op.engine)).cleanup();
        return null;
    }
  }

  #engine(id: number): Promise<LLMEngine | RawEngine> {
    let engine = this.#engines.get(id);
    if (engine === undefined) {
      const { factory } = this.#source;
      engine = Promise.resolve().then(() => factory());
      this.#engines.set(id, engine);
    }
    return engine;
  }

  /** The kit asks only token engines for KV sources and metrics ranks. */
  async #llmEngine(id: number): Promise<LLMEngine> {
    return (await this.#engine(id)) as LLMEngine;
  }

  async #generate(engineId: number, contextId: string, wireRequest: unknown): Promise<number> {
    const engine = await this.#engine(engineId);
    const context = new Context({ id: contextId });
    const output: unknown = this.#source.raw
      ? await (engine as RawEngine).generate(wireRequest as Record<string, unknown>, context)
      : await (engine as LLMEngine).generate(parseOrThrow(GenerateRequestSchema, wireRequest, 'request'), context);
    if (output == null || typeof (output as AsyncIterable<unknown>)[Symbol.asyncIterator] !== 'function') {
      throw new TypeError(`generate() must return an AsyncIterable of chunks, got ${typeName(output)}`);
    }
    const id = this.#nextStream++;
    this.#streams.set(id, { pump: new StreamPump(output as AsyncIterable<unknown>), context });
    this.#contexts.set(contextId, context);
    return id;
  }

  async #next(streamId: number): Promise<{ chunks: unknown[]; done: boolean }> {
    const open = this.#streams.get(streamId);
    if (open === undefined) throw new RangeError(`unknown or closed stream ${streamId}`);
    try {
      const batch = await open.pump.take();
      if (batch.done) this.#release(streamId);
      return batch;
    } catch (err) {
      this.#release(streamId);
      throw err;
    }
  }

  #release(streamId: number): OpenStream | undefined {
    const open = this.#streams.get(streamId);
    this.#streams.delete(streamId);
    if (open) this.#contexts.delete(open.context.id());
    return open;
  }
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'object') return (value as object).constructor?.name ?? 'object';
  return typeof value;
}

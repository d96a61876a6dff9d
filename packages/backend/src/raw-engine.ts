import type { Context } from '@dynamo/runtime';
import type { EngineConfig } from './protocol/engine-config.js';

/** A JSON object: a raw engine's request or one of its response chunks. */
export type RawObject = Record<string, unknown>;

/**
 * A raw media engine, as stock Dynamo's `RawEngine`: requests and responses are JSON objects that
 * pass through untouched (no tokenizer, no token pipeline), e.g. an image or audio generator on a
 * `Text`- or `Tensor`-input endpoint. It has no KV cache events and registers no LLM, so
 * `start()` must leave {@link EngineConfig.llm} unset. {@link runRawConformance} checks an engine
 * against this contract; `run()` serves {@link LLMEngine}s only.
 */
export abstract class RawEngine {
  /** Loads the model and returns its name (and no `llm` registration). */
  abstract start(workerId: bigint): Promise<EngineConfig>;

  /**
   * Streams the response objects for one request. There is no terminal marker: the stream ends
   * when the response is complete, and soon after `context.isStopped()` turns true.
   */
  abstract generate(request: RawObject, context: Context): AsyncIterable<RawObject>;

  /** Told about an explicit cancel; per-request cleanup belongs in the generator's `finally`. */
  async abort(_context: Context): Promise<void> {}

  /** Releases what `start` acquired; must succeed twice in a row and without a `start`. */
  abstract cleanup(): Promise<void>;
}

/** Something that makes a fresh, unstarted raw engine. */
export type RawEngineFactory = () => RawEngine | Promise<RawEngine>;

import { normalizeFinishReason } from '@dynamo/core';
import type { EmbeddingsOutput } from '@dynamo/llm';
import { embeddingToBase64 } from '@dynamo/llm/internal';
import { Cancelled, type Context, DynamoException, type Log, parseOrThrow, toDynamoException, Unknown } from '@dynamo/runtime';
import { mergeStreams } from '@dynamo/runtime/internal';

import type { LLMEngine } from '../engine.js';
import { type GenerateChunk, GenerateChunkSchema } from '../protocol/chunk.js';
import { EmbedRequestSchema, type Embeddings, isEmbedRequest } from '../protocol/embedding.js';
import { type GenerateRequest, GenerateRequestSchema } from '../protocol/request.js';

/** What {@link engineHandler} needs besides the engine. */
export interface EngineHandlerOptions {
  /** The engine's name in logs and errors (default: its class name). */
  engineName?: string;
  log: Log;
}

const isUint32 = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffffffff;

/**
 * The common chunk, `{token_ids, index?}` and nothing else, checked by hand: zod per token was a
 * fifth of the worker's cost per token. Anything else, including every malformed chunk, goes
 * through {@link GenerateChunkSchema}, which names what is wrong.
 */
function plainChunk(raw: unknown): GenerateChunk | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const chunk = raw as Record<string, unknown>;
  for (const key in chunk) if (key !== 'token_ids' && key !== 'index') return undefined;
  const ids = chunk.token_ids;
  if (!Array.isArray(ids) || (chunk.index !== undefined && !isUint32(chunk.index))) return undefined;
  for (const id of ids) if (!isUint32(id)) return undefined;
  return chunk as GenerateChunk;
}

/**
 * The endpoint handler that serves an engine, one call per request:
 * - the request is validated (`InvalidArgument` naming the field);
 * - every chunk is validated, `"abort"` becomes `"cancelled"`, and the terminal chunk is held
 *   until the engine's stream ends, so a chunk after it, or a stream with no terminal, is
 *   reported to that caller as an error naming the engine instead of a silent truncation;
 * - `engine.abort(context)` runs once when the caller stops or kills the request, never when a
 *   stream simply ends;
 * - anything the engine throws reaches the caller as a Dynamo error (a `DynamoException` keeps its
 *   type; `StreamIncomplete` ends the stream without its final marker, so the frontend may migrate);
 * - a request for `sampling_options.n` > 1 choices, to an engine that makes one choice per call
 *   (`LLMEngine.generatesChoices` false), becomes n calls of `generate` (n = 1 each, the seed
 *   plus the choice's index when there is a seed), whose chunks are tagged with their `index`.
 * - a request whose `token_ids` is a list of lists is an embedding request: `engine.embed` answers
 *   it, the vectors are checked and sent as base64 float32.
 * Whatever an engine does wrong, only its own request fails.
 */
export function engineHandler(
  engine: LLMEngine,
  options: EngineHandlerOptions,
): (request: unknown, context: Context) => AsyncGenerator<GenerateChunk | EmbeddingsOutput> {
  const name = options.engineName ?? engine.constructor.name;
  const log = options.log;
  const fail = (context: Context, message: string): never => {
    log.warn({ engine: name, id: context.id() }, message);
    throw new Unknown(`engine ${name}: ${message}`);
  };

  // `serve` hands back the checked stream itself for a one-choice request instead of delegating
  // to it with `yield*`: each level of async generators costs every token a promise and a resume.
  return function serve(body: unknown, context: Context): AsyncGenerator<GenerateChunk | EmbeddingsOutput> {
    if (isEmbedRequest(body)) return embeddedStream(body, context);
    let request: GenerateRequest;
    try {
      request = parseOrThrow(GenerateRequestSchema, body, 'request');
    } catch (err) {
      // Reported in the stream, as the engine's own errors are.
      return failed(err);
    }
    const n = choicesAsked(request);
    if (n === 1 || engine.generatesChoices) return checked(request, context, true);
    return abortingOnCancel(
      mergeStreams(Array.from({ length: n }, (_, index) => withIndex(checked(oneChoice(request, index), context, false), index))),
      context,
    );
  };

  /**
   * Calls `engine.abort(context)` once when the caller stops or kills the request, never when a
   * stream simply ends; returns the function that stops watching.
   */
  function watchCancel(context: Context): () => void {
    let aborted = false;
    const onCancel = () => {
      if (aborted) return;
      aborted = true;
      log.debug({ engine: name, id: context.id(), killed: context.isKilled() }, 'request cancelled; calling engine.abort');
      Promise.resolve()
        .then(() => engine.abort(context))
        .catch((err: unknown) => log.debug({ engine: name, id: context.id(), err: (err as Error).message }, 'engine.abort failed'));
    };
    context.signal.addEventListener('abort', onCancel, { once: true });
    return () => context.signal.removeEventListener('abort', onCancel);
  }

  /** The choices of a request for several, with one cancel watch for them all. */
  async function* abortingOnCancel(chunks: AsyncIterable<GenerateChunk>, context: Context): AsyncGenerator<GenerateChunk> {
    const unwatch = watchCancel(context);
    try {
      yield* chunks;
    } finally {
      unwatch();
    }
  }

  async function* embeddedStream(body: unknown, context: Context): AsyncGenerator<EmbeddingsOutput> {
    yield await embedded(body, context);
  }

  /**
   * An embedding request's answer as Dynamo's wire carries it (`{embeddings: [base64 float32...],
   * prompt_tokens, total_tokens}`), the engine's vectors checked: one per input, finite, all the
   * same length.
   */
  async function embedded(body: unknown, context: Context): Promise<EmbeddingsOutput> {
    const request = parseOrThrow(EmbedRequestSchema, body, 'request');
    let result: Embeddings;
    try {
      result = await engine.embed(request, context);
    } catch (err) {
      if (!(err instanceof DynamoException)) log.warn({ engine: name, id: context.id(), err }, 'engine failed an embedding request');
      throw toDynamoException(err);
    }
    const vectors = result?.embeddings;
    if (!Array.isArray(vectors) || vectors.length !== request.token_ids.length) {
      fail(context, `embed() returned ${Array.isArray(vectors) ? vectors.length : 'no'} vectors for ${request.token_ids.length} inputs`);
    }
    const size = vectors[0]?.length ?? 0;
    vectors.forEach((v, i) => {
      if (v.length !== size || size === 0) fail(context, `embed() returned vector ${i} of length ${v.length}; every vector needs the same length, above 0`);
      for (let j = 0; j < v.length; j++) if (!Number.isFinite(v[j])) fail(context, `embed() returned a non-finite value in vector ${i} at ${j}`);
    });
    const prompt = result.prompt_tokens ?? request.token_ids.reduce((sum, ids) => sum + ids.length, 0);
    return { embeddings: vectors.map((v) => embeddingToBase64(v)), prompt_tokens: prompt, total_tokens: prompt };
  }

  /**
   * The engine's stream for one `generate` call, every chunk checked (see above); with
   * `ownsCancel`, it also calls `engine.abort` when the request is cancelled.
   */
  async function* checked(request: GenerateRequest, context: Context, ownsCancel: boolean): AsyncGenerator<GenerateChunk> {
    const unwatch = ownsCancel ? watchCancel(context) : undefined;
    let stream: AsyncIterator<unknown> | undefined;
    try {
      stream = engine.generate(request, context)[Symbol.asyncIterator]();
      const nextChunk = killable(stream, context);
      let terminal: GenerateChunk | undefined;
      for (let index = 0; ; index++) {
        const next = await nextChunk();
        if (next.done) break;
        if (terminal) fail(context, `yielded chunk ${index} after its terminal chunk (finish_reason ${JSON.stringify(terminal.finish_reason)})`);
        const plain = plainChunk(next.value);
        if (plain) {
          yield plain;
          continue;
        }
        const parsed = GenerateChunkSchema.safeParse(next.value);
        if (!parsed.success) {
          const issues = parsed.error.issues.map((i) => `${i.path.join('.') || 'chunk'}: ${i.message}`).join('; ');
          fail(context, `yielded a malformed chunk ${index}: ${issues}`);
        }
        const chunk = parsed.data!;
        if (chunk.finish_reason == null) {
          yield chunk;
          continue;
        }
        terminal = { ...chunk, finish_reason: normalizeFinishReason(chunk.finish_reason) as GenerateChunk['finish_reason'] };
      }
      if (!terminal) fail(context, 'ended its stream without a terminal chunk (one with finish_reason)');
      yield terminal!;
    } catch (err) {
      // Dynamo errors (ours from `fail` included) pass through as they are.
      if (!(err instanceof DynamoException)) log.warn({ engine: name, id: context.id(), err }, 'engine failed a request');
      throw toDynamoException(err);
    } finally {
      // A caller that went away, or a bad chunk, leaves the engine's generator open: close it so its
      // `finally` blocks run (not awaited once killed: a hung engine would never let it finish).
      const closing = stream?.return?.().catch(() => {});
      if (!context.isKilled()) await closing;
      unwatch?.();
    }
  }
}

/** A stream that fails with `err` when first read. */
// biome-ignore lint/correctness/useYield: it only throws, where the stream's errors belong.
async function* failed(err: unknown): AsyncGenerator<never> {
  throw err;
}

/**
 * The `next()` of an engine's stream, given up with `Cancelled` once the request is killed: an
 * engine that hangs must not hold its caller, nor the worker's in-flight count, forever. One kill
 * listener serves the whole stream; racing each `next()` against the kill would add a reaction to
 * the kill's promise per chunk, all kept until the request ends.
 */
function killable<T>(stream: AsyncIterator<T>, context: Context): () => Promise<IteratorResult<T>> {
  const killedError = () => new Cancelled(`request ${context.id()} was killed`);
  let interrupt: ((err: Cancelled) => void) | undefined;
  void context.killed().then(() => interrupt?.(killedError()));
  return () => {
    if (context.isKilled()) return Promise.reject(killedError());
    return new Promise((resolve, reject) => {
      interrupt = reject;
      stream.next().then(resolve, reject);
    });
  };
}

/** The `sampling_options.n` a request asks for (1 unless a whole number above 1). */
function choicesAsked(request: GenerateRequest): number {
  const n = request.sampling_options?.n;
  return typeof n === 'number' && Number.isInteger(n) && n > 1 ? n : 1;
}

/** Choice `index` of a request for several, as a request for one: its own seed when there is one. */
function oneChoice(request: GenerateRequest, index: number): GenerateRequest {
  const sampling = request.sampling_options ?? {};
  const seed = sampling.seed;
  return { ...request, sampling_options: { ...sampling, n: 1, ...(typeof seed === 'number' && { seed: seed + index }) } };
}

async function* withIndex(chunks: AsyncIterable<GenerateChunk>, index: number): AsyncGenerator<GenerateChunk> {
  for await (const chunk of chunks) yield { ...chunk, index };
}

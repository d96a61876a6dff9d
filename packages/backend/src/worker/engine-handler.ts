import { normalizeFinishReason } from '@dynamo/core';
import { Cancelled, type Context, DynamoException, type Log, parseOrThrow, toDynamoException, Unknown } from '@dynamo/runtime';

import type { LLMEngine } from '../engine.js';
import { type GenerateChunk, GenerateChunkSchema } from '../protocol/chunk.js';
import { GenerateRequestSchema } from '../protocol/request.js';

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
 *   type; `StreamIncomplete` ends the stream without its final marker, so the frontend may migrate).
 * Whatever an engine does wrong, only its own request fails.
 */
export function engineHandler(engine: LLMEngine, options: EngineHandlerOptions): (request: unknown, context: Context) => AsyncGenerator<GenerateChunk> {
  const name = options.engineName ?? engine.constructor.name;
  const log = options.log;
  const fail = (context: Context, message: string): never => {
    log.warn({ engine: name, id: context.id() }, message);
    throw new Unknown(`engine ${name}: ${message}`);
  };

  return async function* serve(body: unknown, context: Context): AsyncGenerator<GenerateChunk> {
    const request = parseOrThrow(GenerateRequestSchema, body, 'request');
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
    let stream: AsyncIterator<unknown> | undefined;
    // A killed request stops waiting for the engine: one that hangs must not hold its caller, nor
    // the worker's in-flight count, forever.
    const killed = context.killed().then((): never => {
      throw new Cancelled(`request ${context.id()} was killed`);
    });
    killed.catch(() => {});
    try {
      stream = engine.generate(request, context)[Symbol.asyncIterator]();
      let terminal: GenerateChunk | undefined;
      for (let index = 0; ; index++) {
        const next = await Promise.race([stream.next(), killed]);
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
      context.signal.removeEventListener('abort', onCancel);
      // A caller that went away, or a bad chunk, leaves the engine's generator open: close it so its
      // `finally` blocks run (not awaited once killed: a hung engine would never let it finish).
      const closing = stream?.return?.().catch(() => {});
      if (!context.isKilled()) await closing;
    }
  };
}

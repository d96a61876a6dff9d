import type { PreprocessedRequest } from '@dynamo/llm';
import { ConnectionTimeout, type Context, DynamoException, dynamoExceptionOf, type StreamReader } from '@dynamo/runtime';

import type { Candidate } from '../routing/router.js';

/**
 * Failures that mean the worker, not the request, went wrong: another worker may finish it. As in
 * stock 1.6.1, a worker with no room (`WorkerOverloaded`) and one that went silent (the response
 * timeout, a `ConnectionTimeout`) count too, each attempt from the same budget.
 */
const MIGRATABLE = new Set(['CannotConnect', 'Disconnected', 'ConnectionTimeout', 'EngineShutdown', 'StreamIncomplete', 'WorkerOverloaded']);

/** Whether a failed attempt may be resent to another worker. */
export function isMigratable(err: unknown): err is DynamoException {
  return err instanceof DynamoException && MIGRATABLE.has(err.kind);
}

/** How {@link migratingStream} places attempts and reports resends. */
export interface MigrationOptions {
  /** Re-issues allowed after the first attempt (0 = none). */
  limit: number;
  context: Context;
  /** The instance for the next attempt, avoiding `failed` when it can; throws when none is left. */
  route(failed: ReadonlySet<bigint>): Candidate | Promise<Candidate>;
  /** Called before each resend with the error that ended the previous attempt. */
  onMigrate(error: DynamoException, instanceId: bigint): void;
  /**
   * Silence after which an attempt is given up (stock's `DYN_HTTP_BACKEND_STREAM_TIMEOUT_SECS`):
   * from the request's dispatch to the worker's first output and between outputs; 0 waits forever.
   */
  responseTimeoutMs?: number;
  /**
   * Past this many tokens (prompt and output) the request is not migrated any more (stock's
   * `--migration-max-seq-len`): the next worker could not hold it.
   */
  maxSeqLen?: number | undefined;
  /** Called once when the sequence passes `maxSeqLen`. */
  onMaxSeqLen?(length: number): void;
  /** Called when the first batch of output arrives (from whichever attempt). */
  onFirstOutput?(): void;
  /**
   * Reads the workers' bytes for the consumer (the Rust path): the batches hold the events it queued, and
   * the generated ids come from it rather than from the chunks.
   */
  reader?: OutputReader | undefined;
  /**
   * Readies each attempt's request before it is sent (disaggregated serving: the prefill hop), or
   * answers it outright (the prefill ended the answer).
   */
  prepare?(request: PreprocessedRequest): Promise<PreparedAttempt>;
}

/** What {@link MigrationOptions.prepare} makes of an attempt: the request to send, or the answer itself. */
export type PreparedAttempt = { request: PreprocessedRequest } | { answer: Record<string, unknown>[] };

/** A {@link StreamReader} that keeps the output's generated ids (`@dynamo/core`'s `StreamProcessor`). */
export interface OutputReader extends StreamReader {
  /** Every id generated so far, over every attempt. */
  readonly generated: Uint32Array;
  readonly completionTokens: number;
  /** What the reads since the last take produced. */
  take(): string;
  /** Ends the output with `length`; its last events wait in `take()`. */
  finishLength(): void;
  /**
   * When output last arrived (`performance.now()`): a reader that handles output itself yields
   * no batches for it, so the inactivity timeout asks.
   */
  readonly lastOutputAt: number;
}

/**
 * The next item of an attempt, or a `ConnectionTimeout` when the worker says nothing for `ms`
 * (`lastOutputAt`, when given, tells of output that came without an item).
 */
async function nextWithin<T>(it: AsyncIterator<T>, ms: number, stop: AbortController, lastOutputAt?: () => number): Promise<IteratorResult<T>> {
  if (ms <= 0) return it.next();
  let timer: NodeJS.Timeout | undefined;
  const next = it.next();
  const since = performance.now();
  try {
    return await Promise.race([
      next,
      new Promise<never>((_, reject) => {
        const check = () => {
          const quiet = performance.now() - Math.max(since, lastOutputAt?.() ?? 0);
          if (quiet < ms) timer = setTimeout(check, ms - quiet);
          else reject(new ConnectionTimeout(`the worker sent nothing for ${ms / 1000} s (backend response inactivity timeout)`));
        };
        timer = setTimeout(check, ms);
      }),
    ]);
  } catch (err) {
    if (err instanceof ConnectionTimeout && !stop.signal.aborted) {
      // The worker's stream is killed; its pending read ends with that, unheard.
      next.catch(() => {});
      stop.abort();
    }
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The continuation of `request` after `generated` tokens: the prompt grows by what was
 * generated and the token budgets shrink by as much, so a new worker picks up where the old one
 * stopped.
 */
export function continuation(request: PreprocessedRequest, generated: readonly number[]): PreprocessedRequest {
  const stop = request.stop_conditions ?? {};
  const less = (n: number | null | undefined) => (n == null ? n : Math.max(0, n - generated.length));
  return {
    ...request,
    token_ids: [...request.token_ids, ...generated],
    stop_conditions: { ...stop, max_tokens: less(stop.max_tokens) ?? null, min_tokens: less(stop.min_tokens) ?? null },
  };
}

/**
 * A worker's output stream for `request`, in batches (`Client.directBatches`), that survives the
 * worker: when an attempt fails with a migratable error and the budget allows, the continuation
 * is sent to another instance and its output follows on in the same stream, so the consumer sees
 * one gap-free sequence. Otherwise the error is thrown (prefixed "Migration limit exhausted" once
 * resends are used up).
 */
export async function* migratingStream(request: PreprocessedRequest, options: MigrationOptions): AsyncGenerator<unknown[]> {
  let budget = options.limit;
  let current = request;
  const generated: number[] = [];
  const failed = new Set<bigint>();
  const promptLength = request.token_ids.length;
  const maxSeqLen = options.maxSeqLen;
  let tooLong = maxSeqLen !== undefined && promptLength > maxSeqLen;
  if (tooLong && options.limit > 0) options.onMaxSeqLen?.(promptLength);
  let first = true;
  const reader = options.reader;
  // Once the sequence is past maxSeqLen, no more resends. A reader that handles output itself
  // yields no batch per token, so the length is also checked when an attempt ends.
  const checkLength = () => {
    if (options.limit === 0 || maxSeqLen === undefined || tooLong) return;
    const length = promptLength + (reader ? reader.completionTokens : generated.length);
    if (length <= maxSeqLen) return;
    tooLong = true;
    options.onMaxSeqLen?.(length);
  };
  for (;;) {
    let sent = current;
    if (options.prepare) {
      const prepared = await options.prepare(current);
      if ('answer' in prepared) {
        yield prepared.answer;
        return;
      }
      sent = prepared.request;
    }
    const target = await options.route(failed);
    const stop = new AbortController();
    const attempt = target.client
      .directBatches(sent, target.instanceId, { context: options.context, signal: stop.signal, ...(reader && { reader }) })
      [Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = await nextWithin(attempt, options.responseTimeoutMs ?? 0, stop, reader && (() => reader.lastOutputAt));
        if (next.done) {
          checkLength();
          return;
        }
        const batch = next.value;
        if (first) {
          first = false;
          options.onFirstOutput?.();
        }
        if (options.limit > 0 && !reader) {
          for (const chunk of batch) {
            const ids = (chunk as { token_ids?: unknown } | null)?.token_ids;
            if (Array.isArray(ids)) for (const id of ids) generated.push(id as number);
          }
        }
        checkLength();
        yield batch;
      }
    } catch (err) {
      checkLength();
      if (!isMigratable(err) || options.context.isStopped() || tooLong) throw err;
      if (budget === 0) {
        if (options.limit === 0) throw err;
        throw dynamoExceptionOf(err.kind, `Migration limit exhausted after ${options.limit} resend(s): ${err.message}`, { cause: err });
      }
      budget -= 1;
      failed.add(target.instanceId);
      options.onMigrate(err, target.instanceId);
      current = continuation(request, reader ? Array.from(reader.generated) : generated);
      if (current.stop_conditions?.max_tokens === 0) {
        // Every token arrived; only the worker's final marker was lost.
        if (!reader) {
          yield [{ token_ids: [], finish_reason: 'length' }];
          return;
        }
        reader.finishLength();
        yield [reader.take()];
        return;
      }
    } finally {
      // An attempt left early (a timeout, the consumer gone) is closed, so its worker is told.
      void attempt.return?.(undefined).catch(() => {});
    }
  }
}

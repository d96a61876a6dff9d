import type { PreprocessedRequest } from '@dynamo/llm';
import { type Context, DynamoException, dynamoExceptionOf } from '@dynamo/runtime';

import type { Candidate } from '../routing/router.js';

/** Failures that mean the worker, not the request, went wrong: another worker may finish it. */
const MIGRATABLE = new Set(['CannotConnect', 'Disconnected', 'ConnectionTimeout', 'EngineShutdown', 'StreamIncomplete']);

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
  route(failed: ReadonlySet<bigint>): Candidate;
  /** Called before each resend with the error that ended the previous attempt. */
  onMigrate(error: DynamoException, instanceId: bigint): void;
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
  for (;;) {
    const target = options.route(failed);
    try {
      for await (const batch of target.client.directBatches(current, target.instanceId, { context: options.context })) {
        if (options.limit > 0) {
          for (const chunk of batch) {
            const ids = (chunk as { token_ids?: unknown } | null)?.token_ids;
            if (Array.isArray(ids)) for (const id of ids) generated.push(id as number);
          }
        }
        yield batch;
      }
      return;
    } catch (err) {
      if (!isMigratable(err) || options.context.isStopped()) throw err;
      if (budget === 0) {
        if (options.limit === 0) throw err;
        throw dynamoExceptionOf(err.kind, `Migration limit exhausted after ${options.limit} resend(s): ${err.message}`, { cause: err });
      }
      budget -= 1;
      failed.add(target.instanceId);
      options.onMigrate(err, target.instanceId);
      current = continuation(request, generated);
      if (current.stop_conditions?.max_tokens === 0) {
        // Every token arrived; only the worker's final marker was lost.
        yield [{ token_ids: [], finish_reason: 'length' }];
        return;
      }
    }
  }
}

import type { ChoiceDelta, PreprocessedRequest, Tokenizer } from '@dynamo/llm';
import { postprocessChoices } from '@dynamo/llm/internal';
import { Context, type DynamoException } from '@dynamo/runtime';

import type { Candidate } from '../routing/router.js';
import { type MigrationOptions, migratingStream, type OutputReader, type PreparedAttempt } from './migration.js';
import type { Attempt } from './plan.js';

/** What running one attempt needs from the request around it. */
export interface AttemptDeps {
  tokenizer: Tokenizer;
  /** Resends allowed when its worker fails mid-stream (only attempts for one choice migrate, as in stock). */
  migrationLimit: number;
  /** Silence after which an attempt is given up (0: never). */
  responseTimeoutMs: number;
  /** Past this many tokens, no more resends. */
  maxSeqLen: number | undefined;
  onMaxSeqLen(length: number): void;
  /** The instance for the attempt's next try, avoiding `failed`; `routeId` keys the router's bookkeeping. */
  route(failed: ReadonlySet<bigint>, request: PreprocessedRequest, routeId: string): Candidate | Promise<Candidate>;
  onMigrate(error: DynamoException, instanceId: bigint): void;
  onFirstOutput(routeId: string): void;
  /** The prefill hop of a disaggregated model's attempts (each try runs its own). */
  prefill?(request: PreprocessedRequest, context: Context, routeId: string): Promise<PreparedAttempt>;
}

/**
 * The postprocessed output of one attempt (see `planAttempts`) under `context`, each delta
 * tagged with the response's index of its choice; the attempt survives its worker (migration)
 * when it makes one choice and its output is not guided. The postprocessor (detokenizer, stop
 * strings) runs over the migrated stream as one, so a character split at the seam comes out whole.
 * A plain function, not a generator: each stacked async generator costs a promise hop per token.
 */
export function attemptDeltas(attempt: Attempt, routeId: string, context: Context, deps: AttemptDeps): AsyncIterable<ChoiceDelta> {
  const deltas = postprocessChoices(deps.tokenizer, attempt.request, migratingStream(attempt.request, migrationOptions(attempt, routeId, context, deps)));
  return attempt.firstIndex === 0 ? deltas : shifted(deltas, attempt.firstIndex);
}

/**
 * The Rust path of a one-choice attempt: its worker's bytes read by `processor`, which writes the
 * choice's events; the batches hold them ready to send. Migration, timeouts and routing are those
 * of {@link attemptDeltas}.
 */
export function attemptEvents(attempt: Attempt, routeId: string, context: Context, deps: AttemptDeps, processor: OutputReader): AsyncIterable<string[]> {
  return migratingStream(attempt.request, { ...migrationOptions(attempt, routeId, context, deps), reader: processor }) as AsyncIterable<string[]>;
}

function migrationOptions(attempt: Attempt, routeId: string, context: Context, deps: AttemptDeps): MigrationOptions {
  // As in stock, guided output is not resumed on another worker (its grammar would start over).
  const resumable = attempt.choices === 1 && attempt.request.sampling_options?.guided_decoding == null;
  return {
    limit: resumable ? deps.migrationLimit : 0,
    context,
    route: (failed) => deps.route(failed, attempt.request, routeId),
    onMigrate: deps.onMigrate,
    responseTimeoutMs: deps.responseTimeoutMs,
    maxSeqLen: deps.maxSeqLen,
    onMaxSeqLen: deps.onMaxSeqLen,
    onFirstOutput: () => deps.onFirstOutput(routeId),
    ...(deps.prefill && { prepare: (request: PreprocessedRequest) => deps.prefill!(request, context, routeId) }),
  };
}

/** `deltas` with their choice indexes moved up by `by`. */
async function* shifted(deltas: AsyncIterable<ChoiceDelta>, by: number): AsyncGenerator<ChoiceDelta> {
  for await (const delta of deltas) {
    delta.index += by;
    yield delta;
  }
}

/**
 * The context of one of a request's several worker requests: its own id (workers key requests by
 * id, so concurrent ones must differ), stopped and killed with the request's.
 */
export function attemptContext(parent: Context, id: string): Context {
  const child = new Context({ id, ...(parent.trace ? { trace: parent.trace } : {}) });
  parent.signal.addEventListener('abort', () => child.stopGenerating(), { once: true });
  void parent.killed().then(() => child.kill());
  return child;
}

import type { PreprocessedRequest } from '@dynamo/llm';
import { CannotConnect, type Context, type DynamoException, Unknown } from '@dynamo/runtime';

import type { Candidate } from '../routing/router.js';
import { isMigratable, type PreparedAttempt } from './migration.js';

/** What a request's prefill hop needs from the model it is for. */
export interface PrefillHopDeps {
  /** The served model's name, for errors. */
  model: string;
  /**
   * A prefill instance for the request, avoiding `failed` (the router's choice), or undefined
   * when no prefill worker is live.
   */
  route(failed: ReadonlySet<bigint>, request: PreprocessedRequest): Candidate | Promise<Candidate> | undefined;
  /** The prefill is over, however it ended (the router's bookkeeping). */
  finished(): void;
  /** Whether the decode workers cannot serve without a prefill worker (their card `needs` one). */
  required: boolean;
  /** A prefill worker failed; the hop goes on without it. */
  onFailed(error: DynamoException, instanceId: bigint): void;
}

/** An engine's output item, as far as the hop reads it. */
interface PrefillOutput {
  token_ids?: number[];
  finish_reason?: string | null;
  disaggregated_params?: Record<string, unknown> | null;
  completion_usage?: { prompt_tokens_details?: unknown } | null;
  [field: string]: unknown;
}

/**
 * The prefill leg of a disaggregated request, as stock 1.6.1's frontend runs it: the request
 * goes to a prefill worker with `max_tokens` 1; its first output decides. An output that ends the
 * answer (EOS or a stop on the one token) is the answer, without `disaggregated_params`;
 * otherwise the decode worker gets the original request with `prefill_result` (the prefill's
 * `disaggregated_params` and `prompt_tokens_details`) and `routing.prefill_worker_id`, and makes
 * the whole answer, its first token too.
 *
 * Unlike stock, a prefill worker that cannot be reached or dies before answering does not fail
 * the request: the next prefill worker gets it, and once none is left the decode worker gets it
 * without a prefill result (a decode worker then evaluates the prompt itself, as ours do). With no
 * prefill worker at all, a model whose decode workers need one answers 503 as stock's does.
 */
export async function prefillHop(request: PreprocessedRequest, context: Context, deps: PrefillHopDeps): Promise<PreparedAttempt> {
  const failed = new Set<bigint>();
  let lastError: DynamoException | undefined;
  for (;;) {
    const target = await deps.route(failed, request);
    if (target === undefined || failed.has(target.instanceId)) {
      if (lastError === undefined && deps.required) {
        // Stock's words: its decode workers need a prefill worker and none is live.
        throw new CannotConnect(
          `Model \`${deps.model}\` is not ready to serve requests yet. The deployment may still be starting up or is not fully provisioned. Please retry shortly.`,
        );
      }
      return { request };
    }
    try {
      return await prefillOn(target, request, context);
    } catch (err) {
      if (!isMigratable(err) || context.isStopped()) throw err;
      lastError = err;
      failed.add(target.instanceId);
      deps.onFailed(err, target.instanceId);
    } finally {
      deps.finished();
    }
  }
}

async function prefillOn(target: Candidate, request: PreprocessedRequest, context: Context): Promise<PreparedAttempt> {
  const worker = target.instanceId.toString(16);
  const prefillRequest = { ...request, stop_conditions: { ...request.stop_conditions, max_tokens: 1 } };
  let first: PrefillOutput | undefined;
  // The rest of the stream (an engine's end marker) is read to its end before decode starts.
  for await (const item of target.client.direct<PrefillOutput>(prefillRequest, target.instanceId, { context })) first ??= item;
  if (first === undefined) throw new Unknown(`prefill worker ${worker} ended its stream without output`);
  const { finish_reason: finish, disaggregated_params: params } = first;
  if (finish != null && finish !== 'length') {
    const { disaggregated_params: _, ...answer } = first;
    return { answer: [answer] };
  }
  if (params == null || typeof params !== 'object') throw new Unknown(`prefill worker ${worker} returned no disaggregated_params to hand to a decode worker`);
  const details = first.completion_usage?.prompt_tokens_details;
  return {
    request: {
      ...request,
      prefill_result: { disaggregated_params: params, ...(details != null && { prompt_tokens_details: details }) },
      routing: { ...request.routing, prefill_worker_id: target.instanceId },
    },
  };
}

import { InvalidArgument, type Log } from '@dynamo/runtime';
import type { FastifyInstance } from 'fastify';

import type { ModelRegistry } from './models/registry.js';
import type { BusyThresholdValues } from './routing/busy-thresholds.js';

const FIELDS = ['active_decode_blocks_threshold', 'active_prefill_tokens_threshold', 'active_prefill_tokens_threshold_frac'] as const;

/** Why a body field does not fit its type (stock answers these 422). */
function typeProblem(body: Record<string, unknown>): string | undefined {
  if (body.model === undefined) return 'missing field `model`';
  if (typeof body.model !== 'string') return 'model: invalid type, expected a string';
  for (const field of FIELDS) {
    const value = body[field];
    if (value === undefined || value === null) continue;
    if (typeof value !== 'number') return `${field}: invalid type, expected ${field === 'active_prefill_tokens_threshold' ? 'u64' : 'f64'}`;
    if (field === 'active_prefill_tokens_threshold' && !(Number.isSafeInteger(value) && value >= 0)) return `${field}: invalid value ${value}, expected u64`;
  }
  return undefined;
}

/**
 * Stock 1.6.1's admin route for the busy thresholds, per served model. `GET /busy_threshold`
 * lists every model's; `POST /busy_threshold` with only `model` reads one (nulls for a model not
 * served), with thresholds sets those it gives (404 for a model not served, 400 for a value out
 * of range, 422 for a body of the wrong shape). Errors are `{"error": "..."}`.
 */
export function registerBusyThresholdRoutes(app: FastifyInstance, registry: ModelRegistry, log: Log): void {
  const entry = (model: string, values: Readonly<BusyThresholdValues> | undefined) => ({
    model,
    active_decode_blocks_threshold: values?.active_decode_blocks_threshold ?? null,
    active_prefill_tokens_threshold: values?.active_prefill_tokens_threshold ?? null,
    active_prefill_tokens_threshold_frac: values?.active_prefill_tokens_threshold_frac ?? null,
  });

  app.get('/busy_threshold', async () => ({ thresholds: registry.all().map((m) => entry(m.name, m.routing.thresholds.values)) }));

  app.post('/busy_threshold', async (req, reply) => {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return reply.code(422).send({ error: 'Failed to deserialize the JSON body into the target type: expected an object' });
    }
    const given = body as Record<string, unknown>;
    const problem = typeProblem(given);
    if (problem) return reply.code(422).send({ error: `Failed to deserialize the JSON body into the target type: ${problem}` });
    const name = given.model as string;
    const model = registry.get(name);
    const update: Partial<BusyThresholdValues> = {};
    for (const field of FIELDS) if (typeof given[field] === 'number') update[field] = given[field];
    if (Object.keys(update).length === 0) return entry(name, model?.routing.thresholds.values);
    if (!model) return reply.code(404).send({ error: `Model '${name}' not found. Thresholds can only be set for discovered models.` });
    try {
      model.routing.thresholds.update(update);
    } catch (err) {
      if (err instanceof InvalidArgument) return reply.code(400).send({ error: err.message });
      throw err;
    }
    log.info({ model: name, ...update }, 'Updated busy thresholds');
    return entry(name, model.routing.thresholds.values);
  });
}

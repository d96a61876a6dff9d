import type { HealthCheck, Log } from '@dynamo/runtime';

import type { LLMEngine } from '../engine.js';

type Payload = Record<string, unknown>;

const isObject = (value: unknown): value is Payload => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The canary for an engine: the `configured` payload (the worker config's, else
 * `DYN_HEALTH_CHECK_PAYLOAD`), else `engine.healthCheckPayload()`. The payload is always marked
 * `_HEALTH_CHECK: true` so engines can tell probes apart. A terminal with an error finish reason
 * fails the probe, so an engine that fails every request is not reported healthy. `undefined`
 * when no payload is available (health then follows serving only).
 */
export async function resolveHealthCheck(engine: LLMEngine, configured: Payload | undefined, log: Log): Promise<HealthCheck | undefined> {
  let payload: Payload | undefined | null = configured;
  if (payload === undefined) {
    try {
      payload = await engine.healthCheckPayload();
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'engine.healthCheckPayload() failed; health canary disabled');
      return undefined;
    }
    if (payload !== null && !isObject(payload)) {
      log.warn('engine.healthCheckPayload() did not return an object; health canary disabled');
      return undefined;
    }
  }
  if (payload == null) return undefined;
  return { payload: { ...payload, _HEALTH_CHECK: true }, failure: errorFinish };
}

function errorFinish(item: unknown): string | undefined {
  const reason = isObject(item) ? item.finish_reason : undefined;
  if (isObject(reason) && typeof reason.error === 'string') return `engine answered the probe with an error: ${reason.error}`;
  return undefined;
}

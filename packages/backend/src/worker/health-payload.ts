import { readFileSync } from 'node:fs';
import type { HealthCheck, Log } from '@dynamo/runtime';

import type { LLMEngine } from '../engine.js';

/** The variable operators use to replace every engine's canary payload. */
export const HEALTH_CHECK_PAYLOAD_ENV = 'DYN_HEALTH_CHECK_PAYLOAD';

type Payload = Record<string, unknown>;

const isObject = (value: unknown): value is Payload => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Parses a canary payload given as JSON text or `@/path/to/file.json`. Returns `undefined`, with a
 * warning naming `source`, when the text is not a JSON object or the file cannot be read.
 */
export function parseHealthCheckPayload(text: string, source: string, log: Log): Payload | undefined {
  let json = text;
  if (text.startsWith('@')) {
    try {
      json = readFileSync(text.slice(1), 'utf8');
    } catch (err) {
      log.warn({ source, err: (err as Error).message }, `${source}: cannot read ${text.slice(1)}; health canary payload ignored`);
      return undefined;
    }
  }
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    log.warn({ source, err: (err as Error).message }, `${source}: not valid JSON; health canary payload ignored`);
    return undefined;
  }
  if (!isObject(value)) {
    log.warn({ source }, `${source}: must be a JSON object; health canary payload ignored`);
    return undefined;
  }
  return value;
}

/**
 * The canary for an engine, by precedence: the worker config's payload, then
 * `DYN_HEALTH_CHECK_PAYLOAD`, then `engine.healthCheckPayload()`. The payload is always marked
 * `_HEALTH_CHECK: true` so engines can tell probes apart. A terminal with an error finish reason
 * fails the probe, so an engine that fails every request is not reported healthy. `undefined`
 * when no payload is available (health then follows serving only).
 */
export async function resolveHealthCheck(
  engine: LLMEngine,
  configured: Payload | undefined,
  env: Readonly<Record<string, string | undefined>>,
  log: Log,
): Promise<HealthCheck | undefined> {
  let payload: Payload | undefined | null = configured;
  const fromEnv = env[HEALTH_CHECK_PAYLOAD_ENV];
  if (payload === undefined && fromEnv !== undefined && fromEnv !== '') payload = parseHealthCheckPayload(fromEnv, HEALTH_CHECK_PAYLOAD_ENV, log);
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

import { setTimeout as sleep } from 'node:timers/promises';
import type { Log, ServedEndpoint } from '@dynamo/runtime';
import type { SystemStatusServer } from '@dynamo/runtime/internal';
import { z } from 'zod';

import type { LLMEngine } from '../engine.js';

/** Controls that take the worker out of routing before they run (stock 1.6.1's list). */
const UNREGISTER_BEFORE = new Set(['pause_generation', 'sleep', 'release_memory_occupation']);
/** Controls after which the worker rejoins routing, unless the engine says it is still asleep. */
const REGISTER_AFTER = new Set(['resume_generation', 'wake_up', 'resume_memory_occupation']);

const ControlNamesSchema = z.array(z.string().regex(/^[A-Za-z0-9_.-]+$/, 'a control name is letters, digits, "_", "." or "-"'));
const ReplySchema = z.record(z.string(), z.unknown());
type Reply = z.infer<typeof ReplySchema>;

/** Stock's test of an engine's reply: `status` "error" (any case) or `success: false`. */
function isErrorReply(reply: Reply): boolean {
  return (typeof reply.status === 'string' && reply.status.toLowerCase() === 'error') || reply.success === false;
}

const refuse = (message: string): Reply => ({ status: 'error', message });

const DrainRequestSchema = z.object({ timeout_secs: z.number().nonnegative().optional() });

/** Where an operator's drain stands: serving, leaving (in-flight requests finishing), or drained. */
export type DrainState = 'serving' | 'draining' | 'drained';

/** How long a drain waits: routers' grace after leaving discovery, then in-flight requests. */
export interface DrainTimes {
  graceMs: number;
  inflightTimeoutMs: number;
}

/**
 * The worker's administrative routes on its system port, one action at a time.
 *
 * Engine controls at `/engine/control/<name>`, as stock Dynamo 1.6.1's worker serves them:
 * `sleep`, `pause_generation` and `release_memory_occupation` first take this instance out of
 * discovery (and report it not ready); `wake_up`, `resume_generation` and
 * `resume_memory_occupation` put it back when the engine's reply is not an error and does not say
 * `is_sleeping: true`. Refusals are 200 replies with `status: "error"`, as stock's; an engine that
 * throws gets a 500.
 *
 * A reversible drain for operators (stock 1.6.1 has none; its design notes plan one): `POST
 * /engine/drain` leaves discovery (the model card stays), waits the router grace period, stops
 * admission and waits for in-flight requests, then answers `state: "drained"`; `POST
 * /engine/resume` admits and rejoins discovery; `GET /engine/drain` reports the state.
 */
export class WorkerAdmin {
  readonly #engine: LLMEngine;
  readonly #status: SystemStatusServer;
  readonly #served: ServedEndpoint;
  readonly #log: Log;
  readonly #times: DrainTimes;
  readonly #routes: string[];
  #queue: Promise<unknown> = Promise.resolve();
  #shuttingDown = false;
  #drain: DrainState = 'serving';

  private constructor(engine: LLMEngine, status: SystemStatusServer, served: ServedEndpoint, log: Log, names: string[], times: DrainTimes) {
    this.#engine = engine;
    this.#status = status;
    this.#served = served;
    this.#log = log;
    this.#times = times;
    this.#routes = [...names.map((name) => `control/${name}`), 'drain', 'resume'];
    for (const name of names) status.setEngineRoute(`control/${name}`, (body) => this.#serial(() => this.#control(name, body)));
    status.setEngineRoute('drain', (body, method) => (method === 'GET' ? Promise.resolve(this.#drainStatus()) : this.#serial(() => this.#startDrain(body))));
    status.setEngineRoute('resume', () => this.#serial(() => this.#resume()));
  }

  /** Registers the routes (engine controls from `engine.supportedControls()`); throws naming a bad control name. */
  static serve(engine: LLMEngine, engineName: string, status: SystemStatusServer, served: ServedEndpoint, log: Log, times: DrainTimes): WorkerAdmin {
    const parsed = ControlNamesSchema.safeParse(engine.supportedControls());
    if (!parsed.success)
      throw new TypeError(
        `engine ${engineName}: supportedControls() must return control names: ${parsed.error.issues.map((i) => `[${i.path.join('.')}] ${i.message}`).join('; ')}`,
      );
    const names = [...new Set(parsed.data)];
    if (names.length > 0) log.info({ controls: names }, 'serving engine controls at /engine/control/<name>');
    return new WorkerAdmin(engine, status, served, log, names, times);
  }

  /** From now on every action is refused: the worker is shutting down. */
  beginShutdown(): void {
    this.#shuttingDown = true;
  }

  /** Removes the routes (they answer 404 from now on). */
  close(): void {
    this.#shuttingDown = true;
    for (const route of this.#routes) this.#status.setEngineRoute(route, undefined);
  }

  #serial(action: () => Promise<Reply>): Promise<Reply> {
    const next = this.#queue.then(action);
    this.#queue = next.catch(() => {});
    return next;
  }

  #drainStatus(): Reply {
    return { status: 'ok', state: this.#drain, inflight: this.#served.inflight };
  }

  async #startDrain(body: unknown): Promise<Reply> {
    if (this.#shuttingDown) return refuse('engine administrative routes are unavailable while the worker is shutting down');
    const parsed = DrainRequestSchema.safeParse(body);
    if (!parsed.success)
      return refuse(
        `drain request body must be {"timeout_secs"?: number >= 0}: ${parsed.error.issues.map((i) => `[${i.path.join('.')}] ${i.message}`).join('; ')}`,
      );
    if (this.#drain === 'drained') return { ...this.#drainStatus(), message: 'worker already drained' };
    const timeoutMs = parsed.data.timeout_secs === undefined ? this.#times.inflightTimeoutMs : parsed.data.timeout_secs * 1000;
    this.#drain = 'draining';
    await this.#served.unregisterInstance();
    this.#log.info({ grace_ms: this.#times.graceMs, timeout_ms: timeoutMs }, 'draining: left discovery');
    await sleep(this.#times.graceMs);
    this.#served.stopAdmission();
    const left = await this.#served.drain(timeoutMs);
    if (left > 0) {
      this.#log.warn({ inflight: left }, 'drain timed out with requests in flight');
      return {
        status: 'error',
        state: 'draining',
        inflight: left,
        message: `${left} requests still in flight after ${timeoutMs / 1000} s; new requests are refused`,
      };
    }
    this.#drain = 'drained';
    this.#log.info('drained: no request in flight');
    return { status: 'ok', state: 'drained', inflight: 0, message: 'worker drained' };
  }

  async #resume(): Promise<Reply> {
    if (this.#shuttingDown) return refuse('engine administrative routes are unavailable while the worker is shutting down');
    if (this.#drain === 'serving') return { ...this.#drainStatus(), message: 'worker already serving' };
    this.#served.resumeAdmission();
    await this.#served.registerInstance();
    this.#drain = 'serving';
    this.#log.info('resumed: admitting requests and back in discovery');
    return { status: 'ok', state: 'serving', inflight: this.#served.inflight, message: 'worker resumed' };
  }

  async #control(name: string, body: unknown): Promise<Reply> {
    if (this.#shuttingDown) return refuse('engine administrative routes are unavailable while the worker is shutting down');
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return refuse('engine control request body must be a JSON object');
    if (UNREGISTER_BEFORE.has(name)) {
      try {
        await this.#served.unregisterInstance();
      } catch (err) {
        return refuse(`failed to unregister endpoint before /engine/control/${name}: ${(err as Error).message}`);
      }
      this.#log.info({ control: name }, 'left discovery for an engine control');
    }
    const raw = await this.#engine.engineControl(name, body as Record<string, unknown>);
    const parsed = ReplySchema.safeParse(raw);
    if (!parsed.success) throw new TypeError(`engineControl('${name}') must return a JSON object, got ${raw === null ? 'null' : typeof raw}`);
    const reply = parsed.data;
    // A drained worker stays out of discovery until /engine/resume.
    if (REGISTER_AFTER.has(name) && this.#drain === 'serving' && !isErrorReply(reply) && reply.is_sleeping !== true) {
      try {
        await this.#served.registerInstance();
      } catch (err) {
        return refuse(
          `engine resumed but re-registration failed after /engine/control/${name}: ${(err as Error).message}; retry /engine/control/${name} to rejoin discovery`,
        );
      }
      this.#log.info({ control: name }, 'rejoined discovery after an engine control');
    }
    return reply;
  }
}

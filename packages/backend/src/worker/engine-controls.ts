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

/**
 * The engine's controls at `/engine/control/<name>` on the worker's system port, as stock Dynamo
 * 1.6.1's worker serves them: one control at a time; `sleep`, `pause_generation` and
 * `release_memory_occupation` first take this instance out of discovery (and report it not ready);
 * `wake_up`, `resume_generation` and `resume_memory_occupation` put it back when the engine's reply
 * is not an error and does not say `is_sleeping: true`. Refusals are 200 replies with
 * `status: "error"`, as stock's; an engine that throws gets a 500.
 */
export class EngineControls {
  readonly #engine: LLMEngine;
  readonly #status: SystemStatusServer;
  readonly #served: ServedEndpoint;
  readonly #log: Log;
  readonly #names: string[];
  #queue: Promise<unknown> = Promise.resolve();
  #shuttingDown = false;

  private constructor(engine: LLMEngine, status: SystemStatusServer, served: ServedEndpoint, log: Log, names: string[]) {
    this.#engine = engine;
    this.#status = status;
    this.#served = served;
    this.#log = log;
    this.#names = names;
    for (const name of names) status.setEngineRoute(`control/${name}`, (body) => this.#run(name, body));
  }

  /** Registers the routes of `engine.supportedControls()`; throws naming a bad control name. */
  static serve(engine: LLMEngine, engineName: string, status: SystemStatusServer, served: ServedEndpoint, log: Log): EngineControls {
    const parsed = ControlNamesSchema.safeParse(engine.supportedControls());
    if (!parsed.success) throw new TypeError(`engine ${engineName}: supportedControls() must return control names: ${parsed.error.issues.map((i) => `[${i.path.join('.')}] ${i.message}`).join('; ')}`);
    const names = [...new Set(parsed.data)];
    if (names.length > 0) log.info({ controls: names }, 'serving engine controls at /engine/control/<name>');
    return new EngineControls(engine, status, served, log, names);
  }

  /** From now on every control is refused: the worker is shutting down. */
  beginShutdown(): void {
    this.#shuttingDown = true;
  }

  /** Removes the routes (they answer 404 from now on). */
  close(): void {
    this.#shuttingDown = true;
    for (const name of this.#names) this.#status.setEngineRoute(`control/${name}`, undefined);
  }

  #run(name: string, body: unknown): Promise<Reply> {
    const next = this.#queue.then(() => this.#control(name, body));
    this.#queue = next.catch(() => {});
    return next;
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
    if (REGISTER_AFTER.has(name) && !isErrorReply(reply) && reply.is_sleeping !== true) {
      try {
        await this.#served.registerInstance();
      } catch (err) {
        return refuse(`engine resumed but re-registration failed after /engine/control/${name}: ${(err as Error).message}; retry /engine/control/${name} to rejoin discovery`);
      }
      this.#log.info({ control: name }, 'rejoined discovery after an engine control');
    }
    return reply;
  }
}

import { DynamoException, toDynamoException } from '@dynamo/runtime';

import type { LLMEngine } from '../engine.js';
import type { WorkerConfig } from '../protocol/worker-config.js';
import { Worker } from './worker.js';

/** Builds an engine (not started) and its worker config from command-line arguments. */
export type EngineFromArgs = (argv: string[]) => Promise<[LLMEngine, WorkerConfig]>;

/** An `LLMEngine` subclass: its static `fromArgs` is what {@link run} calls. */
export interface EngineClass {
  fromArgs(argv?: string[]): Promise<[LLMEngine, WorkerConfig]>;
  readonly name: string;
}

/** Options of {@link run}. */
export interface RunOptions {
  /** Used instead of `EngineClass.fromArgs` to build the engine and its config. */
  engineFactory?: EngineFromArgs;
}

/**
 * The whole life of a worker process, for an engine's `main`:
 *
 * ```ts
 * import { run } from '@dynamo/backend';
 * import { MyEngine } from './my-engine.js';
 * await run(MyEngine);
 * ```
 *
 * `fromArgs(argv)` builds the engine and its `WorkerConfig`; the {@link Worker} connects the
 * runtime, starts the engine, registers the model, serves until SIGTERM/SIGINT and shuts down
 * gracefully. The process then exits: 0 after a clean shutdown, 1 when the worker failed (2 for a
 * bad argument or config), with the error on stderr naming what was wrong.
 */
export async function run(EngineClass: EngineClass, argv: string[] = process.argv.slice(2), options: RunOptions = {}): Promise<never> {
  let code = 0;
  try {
    const [engine, config] = await (options.engineFactory ?? ((args: string[]) => EngineClass.fromArgs(args)))(argv);
    await new Worker(engine, config, { engineName: engine.constructor.name }).run();
  } catch (err) {
    const error = err instanceof DynamoException ? err : toDynamoException(err);
    process.stderr.write(`${EngineClass.name}: ${error.name}: ${error.message}\n`);
    code = error.kind === 'InvalidArgument' ? 2 : 1;
  }
  // An abandoned cleanup or an engine's stray timer must not keep a finished worker alive.
  process.exit(code);
}

import { DistributedRuntime, type RuntimeConfigOverrides } from '@dynamo/runtime';

import type { ServiceClass } from './graph.js';
import { setRuntime } from './runtime-handle.js';
import { serveService } from './serve.js';

/** What a supervised service process tells `dynamo-serve` over IPC. */
export interface ReadyMessage {
  type: 'dynamo-serve:ready';
  httpUrl?: string;
}

/**
 * Serves one service in this process until SIGINT/SIGTERM, or until the supervising
 * `dynamo-serve` goes away: then stops gracefully and resolves. A second signal exits at once.
 */
export async function runServiceProcess(cls: ServiceClass, config: Record<string, unknown>, overrides: RuntimeConfigOverrides): Promise<void> {
  const runtime = await DistributedRuntime.create({ overrides });
  setRuntime(runtime);
  const log = runtime.log('sdk.serve');
  let stopRequested: (reason: string) => void = () => {};
  const stopped = new Promise<string>((resolve) => (stopRequested = resolve));
  const onSignal = (signal: NodeJS.Signals) => stopRequested(signal);
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  // Started by dynamo-serve: when it dies (even by SIGKILL), the IPC channel closes; do not outlive it.
  process.once('disconnect', () => stopRequested('supervisor gone'));
  let served;
  try {
    served = await serveService(cls, { runtime, config });
  } catch (err) {
    await runtime.shutdown();
    throw err;
  }
  process.send?.({ type: 'dynamo-serve:ready', httpUrl: served.httpUrl } satisfies ReadyMessage);
  const reason = await stopped;
  const again = () => process.exit(130);
  process.once('SIGTERM', again);
  process.once('SIGINT', again);
  log.info({ service: cls.name, reason }, `${cls.name} stopping`);
  await served.stop();
  await runtime.shutdown();
  // The IPC channel keeps the process alive; a handle the service's own code leaked must not either.
  if (process.connected) process.disconnect();
  setTimeout(() => process.exit(process.exitCode ?? 0), 5000).unref();
}

import { collectDefaultMetrics, Registry } from 'prom-client';

let registry: Registry | undefined;

/**
 * The process's own Prometheus metrics, under their standard names: resident memory
 * (`process_resident_memory_bytes`), open files (`process_open_fds`), the V8 heap
 * (`nodejs_heap_size_used_bytes`), external memory (`nodejs_external_memory_bytes`), active handles
 * (`nodejs_active_handles_total`), event-loop delay (`nodejs_eventloop_lag_p99_seconds`, sampled every
 * 100 ms since the previous scrape) and more. One registry per process, made on first use, so that a slow leak shows
 * on every `/metrics` (the frontend's and each worker's) without extra tooling.
 */
export function processMetrics(): Registry {
  if (registry === undefined) {
    registry = new Registry();
    // The delay monitor is a repeating timer: at 10 ms an idle process woke 100 times a second.
    // Every 100 ms still puts ~150 samples behind a 15 s scrape's percentiles.
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  }
  return registry;
}

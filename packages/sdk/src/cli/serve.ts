#!/usr/bin/env node
import { fileURLToPath } from 'node:url';
import {
  configFromEnv,
  configOf,
  createLogging,
  DynamoException,
  flagsOf,
  formatHelp,
  InvalidArgument,
  loadRuntimeConfig,
  logConfigFromEnv,
  type RuntimeConfig,
  type RuntimeConfigOverrides,
  runtimeOverridesOf,
  runtimeSettings,
  setting,
  toDynamoException,
} from '@dynamo/runtime';
import { z } from 'zod';

import { serviceSpec } from '../clients.js';
import { planGpus, visibleGpus } from '../gpu-plan.js';
import type { ServiceGraph } from '../graph.js';
import type { ResolvedService } from '../serve-config.js';
import { runServiceProcess } from '../service-process.js';
import { LiveStatus, renderStatus } from '../status-table.js';
import { Supervisor } from '../supervisor.js';
import { parseGraphArgs, resolveGraph } from './graph-args.js';

/** `dynamo-serve`'s settings, each written once; the `runtime` rows are every service's runtime overrides. */
const serveSettings = {
  serve: {
    configFile: setting('configFile', {
      schema: z.string().min(1).optional(),
      description: 'YAML config: service class name → its config (-f); DYN_DEPLOYMENT_CONFIG (YAML or JSON text) replaces it',
      placeholder: 'FILE',
    }),
    serviceName: setting('serviceName', {
      schema: z.string().min(1).optional(),
      description: 'Serve only this service of the graph, in this process (what each Kubernetes pod runs)',
      placeholder: 'CLASS',
    }),
    stopTimeoutMs: setting('stopTimeout', {
      schema: z.coerce.number().positive().default(30),
      description: 'Seconds a worker may take to stop before it is killed',
      env: 'DYN_SERVE_STOP_TIMEOUT',
      placeholder: 'SECS',
      to: (secs) => secs * 1000,
    }),
    dryRun: setting('dryRun', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Print each service with its resolved workers, resources, GPUs and config as JSON, and exit',
    }),
  },
  runtime: {
    // Each service is its own process: an in-memory store would leave them apart.
    discoveryBackend: setting('discoveryBackend', {
      schema: z.enum(['file', 'etcd']).optional(),
      description: 'Discovery for every service: file (the embedded default) or etcd',
      env: 'DYN_DISCOVERY_BACKEND',
      placeholder: 'KIND',
    }),
    requestPlane: runtimeSettings.requestPlane,
    etcdEndpoints: runtimeSettings.etcdEndpoints,
    natsServer: runtimeSettings.natsServer,
    fileKvRoot: runtimeSettings.fileKvRoot,
  },
};
const flags = flagsOf(serveSettings);

/** Settings `dynamo-serve` reads from its environment only. */
const serveEnvSettings = {
  gpus: {
    autoAllocationDisabled: setting('disableAutoGpuAllocation', {
      schema: z.boolean().default(false),
      boolean: true,
      description: 'Do not hand services with resources.gpu devices of CUDA_VISIBLE_DEVICES',
      env: 'DYN_DISABLE_AUTO_GPU_ALLOCATION',
    }),
  },
};

const usage = 'dynamo-serve <module>#<Class> [-f config.yaml] [--Class.key=value ...] [options]';
const summary = `Runs a graph of @dynamo/sdk services: <Class> and every service it depends() on, one process per
worker, restarting any that die. Config layers, lowest first: the @service decorator's config, the
YAML file (or DYN_DEPLOYMENT_CONFIG), then --Class.key=value flags (values are JSON when they
parse; --Class.ServiceArgs.workers=2 changes a service's worker count). SIGINT or SIGTERM stops
every process and exits 0.`;

async function main(argv: string[]): Promise<number> {
  let logConfig: RuntimeConfig['log'];
  let gpus: { autoAllocationDisabled: boolean };
  try {
    logConfig = logConfigFromEnv(process.env);
    ({ gpus } = configFromEnv(serveEnvSettings, process.env));
  } catch (err) {
    process.stderr.write(`dynamo-serve: ${(err as Error).message}\n`);
    return 2;
  }
  let log = createLogging(logConfig).child('sdk.serve');
  let parsed;
  try {
    parsed = parseGraphArgs(flags, argv, process.env);
  } catch (err) {
    process.stderr.write(`dynamo-serve: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(formatHelp(usage, summary, flags, flagsOf(serveEnvSettings)));
    return 0;
  }
  const { serve: f, runtime } = configOf(serveSettings, parsed.values);
  let graph: ServiceGraph;
  let services: ResolvedService[];
  let runtimeOverrides: RuntimeConfigOverrides;
  try {
    runtimeOverrides = runtimeOverridesOf(runtime);
    loadRuntimeConfig(process.env, runtimeOverrides);
    const resolved = await resolveGraph(parsed.ref, f.configFile, parsed.overrides);
    graph = resolved.graph;
    // A supervised worker's supervisor has said it already.
    if (!process.connected) for (const warning of resolved.warnings) log.warn(warning);
    services = resolved.services;
    // One machine, one port: Node 20 cannot share a listening port between processes.
    const sharedPort = services.find((s) => s.workers > 1 && serviceSpec(resolved.graph.services.get(s.name)!).routes.length > 0);
    if (f.serviceName === undefined && sharedPort)
      throw new InvalidArgument(
        `${sharedPort.name}: a service with @api routes runs one worker here, as its port can be bound once (got workers: ${sharedPort.workers}); Kubernetes replicas may be more`,
      );
    if (f.serviceName !== undefined && !graph.services.has(f.serviceName))
      throw new InvalidArgument(`--service-name ${f.serviceName}: no such service in the graph (services: ${[...graph.services.keys()].join(', ')})`);
  } catch (err) {
    process.stderr.write(`dynamo-serve: ${toDynamoException(err).message}\n`);
    return 2;
  }

  if (f.serviceName !== undefined) {
    const name = f.serviceName;
    try {
      await runServiceProcess(graph.services.get(name)!, services.find((s) => s.name === name)!.config, runtimeOverrides);
      return 0;
    } catch (err) {
      process.stderr.write(`dynamo-serve: ${name}: ${toDynamoException(err).message}\n`);
      return err instanceof DynamoException && err.kind === 'InvalidArgument' ? 2 : 1;
    }
  }

  const needsGpus = !gpus.autoAllocationDisabled && services.some((s) => Number(s.resources.gpu) > 0);
  const gpuPlan = !needsGpus
    ? { devices: new Map<string, string[]>(), warnings: [] }
    : planGpus(
        services.map((s) => ({ service: s.name, workers: s.workers, gpu: Number(s.resources.gpu) })),
        visibleGpus(),
      );
  if (f.dryRun) {
    const plan = services.map((s) => ({ ...s, devices: gpuPlan.devices.get(s.name) ?? null, dependsOn: graph.edges.get(s.name) ?? [] }));
    process.stdout.write(`${JSON.stringify({ entry: graph.entry.name, services: plan, warnings: gpuPlan.warnings }, null, 2)}\n`);
    return 0;
  }
  for (const warning of gpuPlan.warnings) log.warn(warning);

  const live = process.stderr.isTTY && !process.env.CI ? new LiveStatus(process.stderr) : undefined;
  if (live) log = createLogging({ ...logConfig, destination: live.stream }).child('sdk.serve');
  const supervisor: Supervisor = new Supervisor({
    command: process.execPath,
    args: [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)],
    services: services.map((s) => ({ name: s.name, workers: s.workers, env: s.envs, devices: gpuPlan.devices.get(s.name) })),
    env: process.env,
    log,
    output: live ? (label, line) => live.line(`${label} | ${line}`) : undefined,
    onChange: live ? () => live.show(renderStatus(supervisor.status())) : undefined,
    onFatal: (message) => stop(`${message}; stopping the graph`, 1),
  });

  let finish!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (finish = resolve));
  let stopping = false;
  function stop(reason: string, code: number): void {
    if (stopping) return;
    stopping = true;
    (code === 0 ? log.info.bind(log) : log.error.bind(log))(reason);
    void supervisor.stop(f.stopTimeoutMs).then(() => finish(code));
  }
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: killing every worker');
      for (const w of supervisor.status()) if (w.pid) process.kill(-w.pid, 'SIGKILL');
      process.exit(130);
    }
    stop(`${signal} received: stopping ${supervisor.status().length} workers`, 0);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  log.info({ entry: graph.entry.name, services: services.map((s) => `${s.name}×${s.workers}`) }, `starting ${services.length} services`);
  supervisor.start();
  void supervisor.ready.then(() => {
    if (!stopping) log.info({ workers: supervisor.status().map((w) => ({ worker: `${w.service}#${w.index}`, pid: w.pid, url: w.httpUrl })) }, 'graph ready');
  });
  const code = await finished;
  live?.done();
  return code;
}

process.exitCode = await main(process.argv.slice(2));

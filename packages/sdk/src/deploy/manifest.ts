import { InvalidArgument } from '@dynamo/runtime';
import { describeIssues } from '@dynamo/runtime/internal';

import { serviceSpec } from '../clients.js';
import type { ServiceGraph } from '../graph.js';
import type { ResolvedService } from '../serve-config.js';
import { type DynamoGraphDeployment, DynamoGraphDeploymentSchema } from './schema.js';

/** What {@link graphManifest} needs besides the graph. */
export interface ManifestOptions {
  /** The DynamoGraphDeployment's name. */
  name: string;
  /** The Kubernetes namespace; unset: kubectl's current one. */
  namespace?: string;
  /** The image of every service without its own `image`. */
  image: string;
  /** `<module>#<Class>` as seen from the image's working directory. */
  graphRef: string;
  /** Where the project sits in the image. */
  workingDir: string;
  /** The config sections (YAML and flags) every pod resolves again, as `DYN_DEPLOYMENT_CONFIG`. */
  deploymentConfig: Record<string, unknown>;
}

/**
 * What every pod advertises to the others: its own IP from the downward API, for each server other
 * pods dial (request plane, call-home, event publishers). The runtime would find the same address
 * by itself on a pod with one interface; named, it holds with sidecars or extra networks too.
 */
const ADVERTISED = ['DYN_TCP_RPC_HOST', 'DYN_TCP_RESPONSE_STREAM_HOST', 'DYN_EVENT_PLANE_HOST'] as const;

function podEnv(serviceEnvs: Record<string, string>): DynamoGraphDeployment['spec']['env'] {
  const own = Object.entries(serviceEnvs).sort(([a], [b]) => a.localeCompare(b));
  const given = new Set(own.map(([name]) => name));
  return [
    { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    // Kubernetes expands $(POD_IP) from the variable above.
    ...ADVERTISED.filter((name) => !given.has(name)).map((name) => ({ name, value: '$(POD_IP)' })),
    ...own.map(([name, value]) => ({ name, value })),
  ];
}

/** Kubernetes names take lowercase letters, digits and '-'. */
export const componentName = (service: string): string => service.toLowerCase().replaceAll('_', '-');

/**
 * The `DynamoGraphDeployment` (nvidia.com/v1beta1) of a graph: one component per service, whose
 * pods run `dynamo-serve <graph> --service-name <Class>` on etcd + NATS, each advertising its pod
 * IP, with the service's workers as replicas and its resources as requests and limits. Throws `InvalidArgument` when
 * the result breaks the resource's rules.
 */
export function graphManifest(graph: ServiceGraph, services: readonly ResolvedService[], options: ManifestOptions): DynamoGraphDeployment {
  const env = [
    { name: 'DYN_DISCOVERY_BACKEND', value: 'etcd' },
    { name: 'DYN_REQUEST_PLANE', value: 'nats' },
    ...(Object.keys(options.deploymentConfig).length > 0 ? [{ name: 'DYN_DEPLOYMENT_CONFIG', value: JSON.stringify(options.deploymentConfig) }] : []),
  ];
  const components = services.map((s) => {
    const { spec, routes } = serviceSpec(graph.services.get(s.name)!);
    const gpus = Math.ceil(Number(s.resources.gpu));
    const port = Number(s.config.port ?? 8000);
    if (routes.length > 0 && port === 0)
      throw new InvalidArgument(`${s.name}: port 0 (any free port) cannot be exposed from a pod; set --${s.name}.port=PORT or a port in the config`);
    return {
      name: componentName(s.name),
      type: spec.componentType,
      replicas: s.workers,
      podTemplate: {
        spec: {
          containers: [
            {
              name: 'main',
              image: spec.image ?? options.image,
              workingDir: options.workingDir,
              command: ['node_modules/.bin/dynamo-serve'],
              args: [options.graphRef, '--service-name', s.name],
              env: podEnv(s.envs),
              ...(routes.length > 0 && { ports: [{ name: 'http', containerPort: port, protocol: 'TCP' as const }] }),
              resources: {
                requests: { cpu: s.resources.cpu, memory: s.resources.memory },
                limits: { cpu: s.resources.cpu, memory: s.resources.memory, ...(gpus > 0 && { 'nvidia.com/gpu': String(gpus) }) },
              },
            },
          ],
        },
      },
    };
  });
  const manifest = {
    apiVersion: 'nvidia.com/v1beta1',
    kind: 'DynamoGraphDeployment',
    metadata: {
      name: options.name,
      ...(options.namespace !== undefined && { namespace: options.namespace }),
      labels: { 'app.kubernetes.io/managed-by': 'dynamo-deploy' },
    },
    spec: { env, components },
  };
  const checked = DynamoGraphDeploymentSchema.safeParse(manifest);
  if (!checked.success) throw new InvalidArgument(describeIssues('DynamoGraphDeployment', checked.error), { cause: checked.error });
  return checked.data;
}

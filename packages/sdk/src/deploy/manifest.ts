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

/** Kubernetes names take lowercase letters, digits and '-'. */
export const componentName = (service: string): string => service.toLowerCase().replaceAll('_', '-');

/**
 * The `DynamoGraphDeployment` (nvidia.com/v1beta1) of a graph: one component per service, whose
 * pods run `dynamo-serve <graph> --service-name <Class>` on etcd + NATS, with the service's
 * workers as replicas and its resources as requests and limits. Throws `InvalidArgument` when
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
    const envs = Object.entries(s.envs).sort(([a], [b]) => a.localeCompare(b));
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
              ...(envs.length > 0 && { env: envs.map(([name, value]) => ({ name, value })) }),
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

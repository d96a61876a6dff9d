import { z } from 'zod';

// The fields of Dynamo 1.6's DynamoGraphDeployment (nvidia.com/v1beta1) that dynamo-deploy
// writes, with the operator's rules: at most 25 components, names unique ignoring case, each pod
// template with a `main` container that has an image.

const quantity = z.string().regex(/^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$/, 'must be a Kubernetes quantity (e.g. 500m, 1, 16Gi)');
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, 'must be an environment variable name');
const envVar = z.union([
  z.strictObject({ name: envName, value: z.string() }),
  // The downward API: a field of the pod itself, such as its IP.
  z.strictObject({ name: envName, valueFrom: z.strictObject({ fieldRef: z.strictObject({ fieldPath: z.string().min(1) }) }) }),
]);
const dnsLabel = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS-1123 label (lowercase letters, digits and -)');

const container = z.strictObject({
  name: z.string().min(1),
  image: z.string().min(1),
  workingDir: z.string().optional(),
  command: z.array(z.string()).optional(),
  args: z.array(z.string()).optional(),
  env: z.array(envVar).optional(),
  ports: z
    .array(z.strictObject({ name: z.string().max(15).optional(), containerPort: z.number().int().min(1).max(65535), protocol: z.literal('TCP').optional() }))
    .optional(),
  resources: z
    .strictObject({
      requests: z.record(z.string(), quantity).optional(),
      limits: z.record(z.string(), quantity).optional(),
    })
    .optional(),
});

const component = z.strictObject({
  name: z
    .string()
    .max(63)
    .regex(/^[A-Za-z0-9-]+$/, 'must be letters, digits and -'),
  type: z.enum(['frontend', 'worker', 'prefill', 'decode', 'planner', 'epp']),
  replicas: z.number().int().min(0),
  podTemplate: z.strictObject({
    metadata: z.strictObject({ labels: z.record(z.string(), z.string()).optional(), annotations: z.record(z.string(), z.string()).optional() }).optional(),
    spec: z.strictObject({
      containers: z
        .array(container)
        .min(1)
        .refine((cs) => cs.some((c) => c.name === 'main'), 'must have a container named main'),
    }),
  }),
});

/** A `DynamoGraphDeployment` as dynamo-deploy writes it; parsing one checks the operator's rules. */
export const DynamoGraphDeploymentSchema = z.strictObject({
  apiVersion: z.literal('nvidia.com/v1beta1'),
  kind: z.literal('DynamoGraphDeployment'),
  metadata: z.strictObject({ name: dnsLabel, namespace: dnsLabel.optional(), labels: z.record(z.string(), z.string()).optional() }),
  spec: z.strictObject({
    env: z.array(envVar).optional(),
    components: z
      .array(component)
      .min(1)
      .max(25)
      .refine((cs) => new Set(cs.map((c) => c.name.toLowerCase())).size === cs.length, 'component names must be unique, ignoring case')
      .refine((cs) => cs.filter((c) => c.type === 'epp').length <= 1, 'at most one component of type epp'),
  }),
});
export type DynamoGraphDeployment = z.infer<typeof DynamoGraphDeploymentSchema>;

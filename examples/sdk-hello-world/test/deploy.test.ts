// dynamo-deploy of the hello-world graph with config.yaml: one component per service, Backend's
// two workers as replicas, Frontend's HTTP port, the config for every pod.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

import { DynamoGraphDeploymentSchema } from '@dynamo/sdk';
import { deploySnapshotSuite } from '@dynamo/testing/deploy-snapshots';

deploySnapshotSuite(
  'dynamo-deploy of sdk-hello-world',
  join(dirname(fileURLToPath(import.meta.url)), '..'),
  ['src/hello-world.ts#Frontend', '-f', 'config.yaml', '--name', 'hello-world', '--Middle.message=comet'],
  'hello-world',
  DynamoGraphDeploymentSchema.parse,
  (dgd) => {
    expect(dgd.spec.components.map((c) => [c.name, c.type, c.replicas])).toEqual([
      ['frontend', 'worker', 1],
      ['middle', 'worker', 1],
      ['backend', 'worker', 2],
    ]);
    const frontend = dgd.spec.components[0]!.podTemplate.spec.containers[0]!;
    expect(frontend.ports).toEqual([{ name: 'http', containerPort: 8000, protocol: 'TCP' }]);
    expect(frontend.args).toEqual(['src/hello-world.ts#Frontend', '--service-name', 'Frontend']);
    const entry = dgd.spec.env!.find((e) => e.name === 'DYN_DEPLOYMENT_CONFIG');
    if (!entry || !('value' in entry)) throw new Error('DYN_DEPLOYMENT_CONFIG is not set to a value');
    const config = JSON.parse(entry.value) as Record<string, Record<string, unknown>>;
    expect(config.Middle).toEqual({ message: 'comet' });
  },
);

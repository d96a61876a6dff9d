// dynamo-deploy of the disaggregated graph: prefill and decode components, GPU limits from
// resources.gpu, Decode's two workers as replicas.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

import { DynamoGraphDeploymentSchema } from '@dynamo/sdk';
import { deploySnapshotSuite } from '@dynamo/testing/deploy-snapshots';

deploySnapshotSuite(
  'dynamo-deploy of sdk-disagg',
  join(dirname(fileURLToPath(import.meta.url)), '..'),
  ['src/disagg.ts#Prefill', '--namespace', 'dynamo'],
  'disagg',
  DynamoGraphDeploymentSchema.parse,
  (dgd) => {
    expect(dgd.metadata).toMatchObject({ name: 'prefill', namespace: 'dynamo' });
    expect(dgd.spec.components.map((c) => [c.name, c.type, c.replicas, c.podTemplate.spec.containers[0]!.resources?.limits?.['nvidia.com/gpu']])).toEqual([
      ['prefill', 'prefill', 1, '1'],
      ['decode', 'decode', 2, '1'],
    ]);
    expect(dgd.spec.env!.map((e) => e.name)).toEqual(['DYN_DISCOVERY_BACKEND', 'DYN_REQUEST_PLANE']);
  },
);

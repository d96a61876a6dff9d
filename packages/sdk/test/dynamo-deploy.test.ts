// dynamo-deploy's command line and the manifest's rules, on the test graph (the examples pin
// their own output with snapshots).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';

import { graphManifest } from '../src/deploy/manifest.js';
import { DynamoGraphDeploymentSchema } from '../src/deploy/schema.js';
import { endpoint, service } from '../src/index.js';
import { resolveServices } from '../src/serve-config.js';
import { runDeploy } from '@dynamo/testing/dynamo-serve';

const here = dirname(fileURLToPath(import.meta.url));
const graph = 'test/fixtures/serve-graph.ts#Gateway';
const root = join(here, '..');
const out = mkdtempSync(join(tmpdir(), 'dynamo-deploy-cli-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('dynamo-deploy', () => {
  it('writes deploy/<name>/ by default with DYNAMO_IMAGE as the image, and says how to build and apply', async () => {
    const cwd = mkdtempSync(join(out, 'cwd-'));
    const r = await runDeploy([join(root, graph), '--Worker.ServiceArgs.workers=3', '--Gateway.port=8080'], cwd, { DYNAMO_IMAGE: 'reg.example/from-env:1' });
    expect(r.code, r.stderr).toBe(0);
    const file = join(cwd, 'deploy/gateway/dynamo-graph-deployment.yaml');
    expect(r.stdout).toContain('wrote deploy/gateway/dynamo-graph-deployment.yaml and deploy/gateway/Dockerfile');
    expect(r.stdout).toMatch(/docker build -f deploy\/gateway\/Dockerfile -t reg\.example\/from-env:1 /);
    expect(r.stdout).toContain('kubectl apply -f deploy/gateway/dynamo-graph-deployment.yaml');
    const dgd = DynamoGraphDeploymentSchema.parse(parse(readFileSync(file, 'utf8')));
    expect(dgd.spec.components.map((c) => [c.name, c.replicas, c.podTemplate.spec.containers[0]!.image])).toEqual([
      ['gateway', 1, 'reg.example/from-env:1'],
      ['worker', 3, 'reg.example/from-env:1'],
    ]);
    const worker = dgd.spec.components[1]!.podTemplate.spec.containers[0]!;
    expect(worker.env?.at(-1)).toEqual({ name: 'FROM_DECORATOR', value: 'decorator' });
    expect(worker.resources?.limits?.['nvidia.com/gpu']).toBe('1');
    expect(dgd.spec.components[0]!.podTemplate.spec.containers[0]!.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
  });

  it('gives every pod etcd + NATS and has it advertise its own pod IP to the other pods, unless the service names an address', async () => {
    const cwd = mkdtempSync(join(out, 'env-'));
    const r = await runDeploy([join(root, graph), '--image', 'img:1', '--Gateway.port=8080', '--Worker.ServiceArgs.envs.DYN_TCP_RPC_HOST=ib0'], cwd);
    expect(r.code, r.stderr).toBe(0);
    const dgd = DynamoGraphDeploymentSchema.parse(parse(readFileSync(join(cwd, 'deploy/gateway/dynamo-graph-deployment.yaml'), 'utf8')));
    expect(dgd.spec.env).toEqual(
      expect.arrayContaining([
        { name: 'DYN_DISCOVERY_BACKEND', value: 'etcd' },
        { name: 'DYN_REQUEST_PLANE', value: 'nats' },
      ]),
    );
    const [gateway, worker] = dgd.spec.components.map((c) => c.podTemplate.spec.containers[0]!.env ?? []);
    const podIp = { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } };
    expect(gateway!.slice(0, 4)).toEqual([
      podIp,
      { name: 'DYN_TCP_RPC_HOST', value: '$(POD_IP)' },
      { name: 'DYN_TCP_RESPONSE_STREAM_HOST', value: '$(POD_IP)' },
      { name: 'DYN_EVENT_PLANE_HOST', value: '$(POD_IP)' },
    ]);
    // POD_IP comes first: Kubernetes expands $(POD_IP) only from variables defined before it.
    expect(worker).toContainEqual(podIp);
    expect(worker!.filter((e) => e.name === 'DYN_TCP_RPC_HOST')).toEqual([{ name: 'DYN_TCP_RPC_HOST', value: 'ib0' }]);
    expect(worker).toContainEqual({ name: 'DYN_TCP_RESPONSE_STREAM_HOST', value: '$(POD_IP)' });
  });

  it('--dry-run prints both files and writes nothing', async () => {
    const cwd = mkdtempSync(join(out, 'dry-'));
    const r = await runDeploy([join(root, graph), '--image', 'img:1', '--dry-run', '--Gateway.port=8080'], cwd);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^# deploy\/gateway\/dynamo-graph-deployment\.yaml\napiVersion: nvidia\.com\/v1beta1\n/);
    expect(r.stdout).toContain('# deploy/gateway/Dockerfile\n# The image of the Dynamo graph');
    expect(existsSync(join(cwd, 'deploy'))).toBe(false);
  });

  it('--apply without kubectl on PATH writes the manifest and says kubectl is missing', async () => {
    const cwd = mkdtempSync(join(out, 'apply-'));
    const r = await runDeploy([join(root, graph), '--image', 'img:1', '--apply', '--Gateway.port=8080'], cwd, { PATH: mkdtempSync(join(out, 'empty-path-')) });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--apply: kubectl could not run \(not found on PATH\)/);
    expect(existsSync(join(cwd, 'deploy/gateway/dynamo-graph-deployment.yaml'))).toBe(true);
  });

  it.skipIf(spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status !== 0)(
    '--apply runs kubectl apply on the manifest and passes on its failure (no cluster here)',
    async () => {
      const cwd = mkdtempSync(join(out, 'kubectl-'));
      const r = await runDeploy([join(root, graph), '--image', 'img:1', '--apply', '--Gateway.port=8080'], cwd, {
        KUBECONFIG: join(cwd, 'no-such-kubeconfig'),
      });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(join(cwd, 'deploy/gateway/dynamo-graph-deployment.yaml'));
    },
  );

  it.each([
    [[graph], /--image: give the image the graph runs in/],
    [[graph, '--image', 'i', '--dry-run', '--apply'], /--dry-run and --apply exclude each other/],
    [[graph, '--image', 'i', '--dry-run'], /Gateway: port 0 \(any free port\) cannot be exposed from a pod; set --Gateway\.port/],
    [[graph, '--image', 'i', '--Gateway.port=80', '--name', 'Not_A_Name', '--dry-run'], /DynamoGraphDeployment\.metadata\.name: must be a DNS-1123 label/],
    [
      [graph, '--image', 'i', '--Gateway.port=80', '--Worker.ServiceArgs.resources.memory=lots', '--dry-run'],
      /DynamoGraphDeployment\.spec\.components\.1\.podTemplate.*memory: must be a Kubernetes quantity/,
    ],
    [['nothing.ts#X', '--image', 'i'], /no module at/],
  ])('%j exits 2 naming what is wrong', async (args, message) => {
    const r = await runDeploy(args as string[], root);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it('--help lists the options', async () => {
    const r = await runDeploy(['--help'], root);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: dynamo-deploy <module>#<Class> --image IMAGE/);
  });
});

describe('the DynamoGraphDeployment schema', () => {
  const manifest = (services: number) => {
    const classes = Array.from({ length: services }, (_, i) => {
      @service({ dynamo: { namespace: 'big' } })
      class Svc {
        @endpoint({ request: z.object({}) })
        async *generate() {}
      }
      Object.defineProperty(Svc, 'name', { value: `Svc${i}` });
      return Svc;
    });
    const g = { entry: classes[0]!, services: new Map(classes.map((c) => [c.name, c])), edges: new Map<string, string[]>() };
    return () =>
      graphManifest(g, resolveServices(g, {}, {}).services, { name: 'big', image: 'i', graphRef: 'g.ts#Svc0', workingDir: '/app', deploymentConfig: {} });
  };

  it('takes at most 25 components', () => {
    expect(manifest(25)().spec.components).toHaveLength(25);
    expect(manifest(26)).toThrow(/spec\.components: Too big: expected array to have <=25 items/);
  });

  it('refuses component names that differ only in case, and a pod without a main container', () => {
    const base = manifest(1)();
    const twice = { ...base, spec: { ...base.spec, components: [base.spec.components[0]!, { ...base.spec.components[0]!, name: 'SVC0' }] } };
    expect(DynamoGraphDeploymentSchema.safeParse(twice).error?.issues[0]?.message).toBe('component names must be unique, ignoring case');
    const noMain = structuredClone(base);
    noMain.spec.components[0]!.podTemplate.spec.containers[0]!.name = 'app';
    expect(DynamoGraphDeploymentSchema.safeParse(noMain).error?.issues[0]?.message).toBe('must have a container named main');
  });
});

// deploy/docker-compose.yml brings up etcd and NATS for people moving off the embedded default. It
// must stay in step with what the suite tests: the same versions as the nats-server and etcd the
// tests run, commands those versions accept, the ports the runtime dials by default, and the
// README's command. `docker compose config` checks the file itself where the compose plugin exists.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadRuntimeConfig } from '@dynamo/runtime';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';

import { startChild } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const composeFile = join(repoRoot, 'deploy', 'docker-compose.yml');

interface Service {
  image: string;
  command: string[];
  ports: string[];
}
const compose = parse(readFileSync(composeFile, 'utf8')) as { services: Record<string, Service> };
const nats = compose.services.nats!;
const etcd = compose.services.etcd!;

/** The `X.Y.Z` a binary reports, as the tests run it. */
function installedVersion(command: string, pattern: RegExp): string {
  const out = spawnSync(command, ['--version'], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`${command} --version failed: ${out.stderr || out.error?.message}`);
  return pattern.exec(out.stdout)![1]!;
}

/** Host ports the file publishes (`"HOST:CONTAINER"`). */
const published = (service: Service) => service.ports.map((p) => Number(p.split(':')[0]));

const temp = mkdtempSync(join(tmpdir(), 'compose-'));
afterAll(() => rmSync(temp, { recursive: true, force: true }));

describe('deploy/docker-compose.yml', () => {
  it('pins the nats-server and etcd versions the test suite runs', () => {
    expect(nats.image).toBe(`nats:${installedVersion('nats-server', /v(\d+\.\d+\.\d+)/)}`);
    expect(etcd.image).toBe(`quay.io/coreos/etcd:v${installedVersion('etcd', /etcd Version: (\d+\.\d+\.\d+)/)}`);
  });

  it('publishes the ports the runtime dials by default, and the README says how to use it', () => {
    const defaults = loadRuntimeConfig({});
    expect(published(nats)).toContain(Number(new URL(defaults.nats.server).port));
    expect(published(etcd)).toContain(Number(new URL(defaults.etcd.endpoints[0]!).port));
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    expect(readme).toContain('docker compose -f deploy/docker-compose.yml up -d');
    expect(readme).toContain('DYN_DISCOVERY_BACKEND=etcd');
    expect(readme).toContain('DYN_REQUEST_PLANE=nats');
  });

  it("the nats service's command starts nats-server with JetStream and monitoring", async () => {
    const [client, monitor] = [await freePort(), await freePort()];
    const args = nats.command.map((a) => (a === '4222' ? String(client) : a === '8222' ? String(monitor) : a));
    const child = startChild('nats-server', [...args, '-a', '127.0.0.1', '-sd', join(temp, 'jetstream')]);
    try {
      const varz = await waitFor(
        'nats-server monitoring',
        async () =>
          (await fetch(`http://127.0.0.1:${monitor}/varz`).catch(() => undefined))?.json() as
            | Promise<{ port: number; jetstream?: { config?: unknown } }>
            | undefined,
        20_000,
      );
      expect(varz.port).toBe(client);
      expect(varz.jetstream?.config).toBeDefined();
    } finally {
      child.kill();
    }
  });

  it("the etcd service's command starts etcd serving its client URL", async () => {
    const [client, peer] = [await freePort(), await freePort()];
    const args = etcd.command
      .slice(1)
      .map((a) => a.replace('/etcd-data', join(temp, 'etcd-data')).replace('0.0.0.0', '127.0.0.1').replace(':2379', `:${client}`).replace(':2380', `:${peer}`));
    // etcd also advertises a peer URL; on its own it defaults to localhost:2380, which another etcd may hold.
    const child = startChild(etcd.command[0]!, [
      ...args,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
      `--initial-cluster=dynamo-etcd=http://127.0.0.1:${peer}`,
    ]);
    try {
      const version = await waitFor(
        'etcd',
        async () => (await fetch(`http://127.0.0.1:${client}/version`).catch(() => undefined))?.json() as Promise<{ etcdserver: string }> | undefined,
        20_000,
      );
      expect(etcd.image).toContain(version.etcdserver);
    } finally {
      child.kill();
    }
  });

  const plugin = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' });
  it.skipIf(plugin.status !== 0)('passes `docker compose config` (skipped without the docker compose plugin)', () => {
    const out = spawnSync('docker', ['compose', '-f', composeFile, 'config', '--quiet'], { encoding: 'utf8' });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
  });
});

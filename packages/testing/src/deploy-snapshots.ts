// The snapshot suite of an example graph's dynamo-deploy output: the manifest passes the
// DynamoGraphDeployment schema (the caller's `parse`), both files match their pinned snapshots, and the Dockerfile
// builds where a docker daemon answers.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';

import { runDeploy } from './dynamo-serve.js';

const dockerUp = spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 10_000 }).status === 0;

/**
 * `parse` is the DynamoGraphDeployment schema's (from `@dynamo/sdk`, which this package cannot
 * depend on: the SDK's tests depend on this package); `check` asserts on what it returns.
 */
export function deploySnapshotSuite<M>(
  title: string,
  exampleRoot: string,
  args: string[],
  snapshotPrefix: string,
  parse: (manifest: unknown) => M,
  check: (manifest: M) => void,
): void {
  describe(title, () => {
    const out = mkdtempSync(join(tmpdir(), 'dynamo-deploy-'));
    afterAll(() => rmSync(out, { recursive: true, force: true }));
    let written = false;
    const deploy = async () => {
      if (!written) {
        const r = await runDeploy([...args, '--image', 'registry.example/dynamo-graph:0.1', '-o', out], exampleRoot);
        expect(r.code, r.stderr).toBe(0);
        written = true;
      }
      return { manifest: readFileSync(join(out, 'dynamo-graph-deployment.yaml'), 'utf8'), dockerfile: readFileSync(join(out, 'Dockerfile'), 'utf8') };
    };

    it('writes a schema-valid DynamoGraphDeployment, pinned by a snapshot', async () => {
      const { manifest } = await deploy();
      check(parse(parseYaml(manifest)));
      await expect(manifest).toMatchFileSnapshot(join(exampleRoot, 'test/__snapshots__', `${snapshotPrefix}.dgd.yaml`));
    });

    it('writes the Dockerfile of the graph, pinned by a snapshot', async () => {
      const { dockerfile } = await deploy();
      await expect(dockerfile).toMatchFileSnapshot(join(exampleRoot, 'test/__snapshots__', `${snapshotPrefix}.Dockerfile`));
    });

    it.skipIf(!dockerUp)(
      'the Dockerfile builds (skipped without a docker daemon)',
      async () => {
        await deploy();
        const root = join(exampleRoot, '../..');
        const built = spawnSync('docker', ['build', '-q', '-f', join(out, 'Dockerfile'), '-t', `dynamo-sdk-${snapshotPrefix}:test`, root], {
          encoding: 'utf8',
          timeout: 900_000,
        });
        expect(built.status, built.stderr).toBe(0);
      },
      900_000,
    );
  });
}

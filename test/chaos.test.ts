// The short form of `pnpm chaos` (bench/chaos/main.ts), as CI's proof that migration holds under
// kill -9 and rolling SIGTERM: 200 streamed answers per phase from workers that continue their
// prompt, each checked token for token. (The long form, for releases, is `pnpm chaos`.)
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

import { startChild } from '@dynamo/testing/child';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
type PhaseReport = {
  phase: string;
  requests: number;
  exact: number;
  inexact: number;
  failed: number;
  migrations: number;
  disruptions: number;
  samples: string[];
};

it('pnpm chaos (short form): every answer exact while workers are killed and restarted, then replaced one by one', async () => {
  const out = join(tmpdir(), `chaos-${process.pid}.json`);
  const run = startChild(
    process.execPath,
    ['--import', 'tsx', join(repo, 'bench', 'chaos', 'main.ts'), '--requests', '200', '--every-min-ms', '1500', '--every-max-ms', '3000', '--json', out],
    {},
    { cwd: join(repo, 'bench'), group: true },
  );
  expect(await run.exited).toBe(0);
  const reports = JSON.parse(readFileSync(out, 'utf8')) as PhaseReport[];
  const [kill, sigterm] = reports;
  expect(kill).toMatchObject({ phase: 'kill', requests: 200, exact: 200, inexact: 0, failed: 0 });
  expect(kill!.disruptions).toBeGreaterThanOrEqual(3);
  expect(kill!.migrations).toBeGreaterThan(0);
  expect(sigterm).toMatchObject({ phase: 'sigterm', requests: 200, exact: 200, inexact: 0, failed: 0 });
  expect(sigterm!.disruptions).toBeGreaterThanOrEqual(2);
}, 240_000);

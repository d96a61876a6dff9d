import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { type Child, startChild } from '@dynamo/testing/child';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const store = mkdtempSync(join(tmpdir(), 'dynamo-example-'));
const env = { DYN_FILE_KV: store, DYN_LOG: 'warn' };
const children: Child[] = [];

function run(
  script: string,
  args: string[] = [],
): { child: Child['child']; line: (re: RegExp) => Promise<string>; exit: Promise<number | null>; out: string[] } {
  const c = startChild(process.execPath, ['--import', 'tsx', join(root, 'src', script), ...args], env, root);
  children.push(c);
  return { child: c.child, out: c.lines, exit: c.exited, line: (re) => c.waitForLine(re, 25_000) };
}

afterAll(() => {
  for (const c of children) c.kill();
  rmSync(store, { recursive: true, force: true });
});

describe('runtime-worker example', () => {
  it('two worker processes share round-robin load from a client process, then shut down on SIGTERM', async () => {
    const a = run('worker.ts');
    const b = run('worker.ts');
    const ids = (await Promise.all([a.line(/^worker \w+ serving/), b.line(/^worker \w+ serving/)])).map((l) => l.split(' ')[1]);
    const client = run('client.ts', ['6']);
    expect(await client.exit).toBe(0);
    expect(client.out[0]).toMatch(/^found 2 instance\(s\)/);
    const servedBy = client.out.filter((l) => l.startsWith('request ')).map((l) => l.split(' ')[4]!.replace(':', ''));
    expect(servedBy).toHaveLength(6);
    expect(new Set(servedBy)).toEqual(new Set(ids));
    expect(client.out).toContain(`request 0 served by ${servedBy[0]}: request 0 says hello`);
    a.child.kill('SIGTERM');
    b.child.kill('SIGTERM');
    expect(await Promise.all([a.exit, b.exit])).toEqual([0, 0]);
  }, 60_000);
});

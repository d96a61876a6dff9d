// The README's dynamo-serve walk-through, run as written: its graph snippet as src/graph.ts, its
// YAML as config.yaml, each `dynamo-serve src/graph.ts#Frontend ...` command it shows (on a free
// port), and the `# data:` line it promises for `{"text": "test"}`.
import { mkdtempSync, readFileSync, rmSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

import { freePort } from '@dynamo/testing/free-port';
import { startServe } from '@dynamo/testing/dynamo-serve';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const blocks = (lang: string) => [...readme.matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1]!);
// Inside the package, so `@dynamo/sdk` resolves to it.
const dir = mkdtempSync(join(root, '.readme-walkthrough-'));
mkdirSync(join(dir, 'src'));
writeFileSync(join(dir, 'src/graph.ts'), blocks('ts')[0]!);
writeFileSync(join(dir, 'config.yaml'), blocks('yaml')[0]!);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Each `dynamo-serve` command of the walk-through with the data line the README shows after it. */
const runs = blocks('sh')
  .flatMap((b) => [...b.matchAll(/^dynamo-serve (src\/graph\.ts#Frontend.*)\n(?:curl .*\n)?# data: (.*)$/gm)])
  .map((m) => ({ args: m[1]!.split(' '), data: JSON.parse(m[2]!) as string }));

describe('the README walk-through', () => {
  it('shows two dynamo-serve runs with their answers', () => {
    expect(runs.map((r) => r.data)).toEqual(['Frontend: Middle: Backend: test-mid-back', 'Frontend: Middle: Backend: test-moon-venus']);
  });

  it.each(runs)(
    '$args answers $data',
    async ({ args, data }) => {
      const port = await freePort();
      const serve = startServe(
        [...args.filter((a) => !a.startsWith('--Frontend.port')), `--Frontend.port=${port}`, '--Frontend.host=127.0.0.1'],
        { DYN_FILE_KV: join(dir, 'kv'), DYN_DISCOVERY_BACKEND: undefined, DYN_REQUEST_PLANE: undefined },
        dir,
      );
      try {
        await serve.ready();
        const res = await fetch(`http://127.0.0.1:${port}/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ text: 'test' }),
        });
        expect(await res.text()).toBe(`data: ${JSON.stringify(data)}\n\n`);
        serve.child.kill('SIGTERM');
        expect((await serve.exited).code).toBe(0);
      } finally {
        if (serve.child.exitCode === null) serve.child.kill('SIGKILL');
      }
    },
    90_000,
  );
});

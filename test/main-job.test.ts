// The README's main job, run exactly as the README says (its first command), on a free port: SmolLM2
// must answer the capital of France with Paris, the sample engine must be served beside it, the
// README's curl request must be answered with curl's semantics (choices[0].message.content
// non-empty, finish_reason stop or length), and it must stop on SIGTERM. Then --no-model, the
// model-free smoke test, answers through the sample engine alone.
import { readFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';

import { type Child, startChild } from '@dynamo/testing/child';
import { freePort, waitFor } from '@dynamo/testing/free-port';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
const kvDir = mkdtempSync(join(tmpdir(), 'main-job-kv-'));
let demo: Child | undefined;
async function stopDemo(): Promise<void> {
  // SIGTERM first: demo.sh stops the frontend and worker it started in sessions of their own.
  if (demo && demo.child.exitCode === null && demo.child.signalCode === null) {
    demo.child.kill('SIGTERM');
    await Promise.race([demo.exited, new Promise((r) => setTimeout(r, 15_000))]);
  }
  // Then whatever is left of its process group (an install it was running, say).
  demo?.kill();
}
afterAll(async () => {
  await stopDemo();
  rmSync(kvDir, { recursive: true, force: true });
});

it("the README main job prints SmolLM2's answer (Paris), serves the sample engine beside it and its curl line, and stops on SIGTERM", async () => {
  const firstBlock = /```bash\n([^\n]*)\n/.exec(readme)![1]!;
  const command = firstBlock.split('#')[0]!.trim();
  expect(command).toBe('bash scripts/demo.sh');
  const port = await freePort();
  const [program, ...args] = command.split(' ');
  demo = startChild(program!, args, { DYN_HTTP_PORT: String(port), DYN_FILE_KV: kvDir, CI: 'true' }, { cwd: repoRoot, group: true });
  const answered = await demo.waitForLine(/^demo: smollm2 answered in [\d.]+ s/, 280_000);
  const seconds = Number(/in ([\d.]+) s/.exec(answered)![1]);
  expect(seconds).toBeLessThan(60);
  // The answer is the next line, which may come in a later chunk of output than the one above.
  const answer = await waitFor('the answer line after it', () => demo!.lines[demo!.lines.indexOf(answered) + 1], 10_000);
  expect(JSON.parse(answer)).toContain('Paris');
  await demo.waitForLine(/^demo: qwen3 is served too/, 60_000);

  // The README's curl line, sent to this run's port.
  const curl = /curl -s 127\.0\.0\.1:8000(\/v1\/chat\/completions)[^\n]*\\\n\s*-d '([^']+)'/.exec(readme)!;
  const res = await fetch(`http://127.0.0.1:${port}${curl[1]}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: curl[2] });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { choices: Array<{ message: { content: string }; finish_reason: string }> };
  expect(body.choices[0]!.message.content.length).toBeGreaterThan(0);
  expect(['stop', 'length']).toContain(body.choices[0]!.finish_reason);

  demo.child.kill('SIGTERM');
  expect(await demo.exited).toBe(0);
  await expect(fetch(`http://127.0.0.1:${port}/live`)).rejects.toThrow();
});

it('with --no-model, the main job answers through the sample engine alone', async () => {
  await stopDemo();
  const port = await freePort();
  demo = startChild('bash', ['scripts/demo.sh', '--no-model'], { DYN_HTTP_PORT: String(port), DYN_FILE_KV: kvDir, CI: 'true' }, { cwd: repoRoot, group: true });
  const answered = await demo.waitForLine(/^demo: qwen3 answered in [\d.]+ s/, 280_000);
  const answer = await waitFor('the answer line after it', () => demo!.lines[demo!.lines.indexOf(answered) + 1], 10_000);
  expect(JSON.parse(answer)).not.toBe('');
  const models = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: Array<{ id: string }> };
  expect(models.data.map((m) => m.id)).toEqual(['qwen3']);
  demo.child.kill('SIGTERM');
  expect(await demo.exited).toBe(0);
});

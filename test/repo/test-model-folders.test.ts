// Test files make Qwen3 model folders (each holds the 11 MB tokenizer) and vitest ends its workers
// without `exit` handlers: the folders of a process that is gone must not pile up in /tmp run after run.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Runs a node process that makes a model folder, prints it, then ends as `end` says. */
function makeFolder(end: 'exit' | 'SIGKILL'): string {
  const script = `
    import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';
    console.log(qwen3ModelDir());
    ${end === 'SIGKILL' ? "process.kill(process.pid, 'SIGKILL');" : ''}`;
  try {
    return execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: import.meta.dirname, encoding: 'utf8' }).trim();
  } catch (err) {
    const out = (err as { stdout?: string }).stdout?.trim();
    if (end === 'SIGKILL' && out) return out;
    throw err;
  }
}

describe('temporary Qwen3 model folders', () => {
  it('go when their process exits, and a killed process’s go with the next process that makes one', () => {
    const killed = makeFolder('SIGKILL');
    expect(existsSync(`${killed}/tokenizer.json`), `${killed} should survive a SIGKILL`).toBe(true);
    const exited = makeFolder('exit');
    expect(existsSync(dirname(exited)), `${exited} should go with its process`).toBe(false);
    expect(existsSync(dirname(killed)), `${killed} should go with the next process that makes a folder`).toBe(false);
  });
});

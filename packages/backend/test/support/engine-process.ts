import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { type Child, startChild } from '@dynamo/testing/child';
import { waitFor } from '@dynamo/testing/free-port';
import { qwen3ModelDir } from '@dynamo/testing/qwen3-model';

const here = dirname(fileURLToPath(import.meta.url));

/** A model folder with Qwen3's real tokenizer, for registering cards. */
export const modelDir = qwen3ModelDir();

/** Starts `test/fixtures/<fixture>.ts` as a worker process (through tsx, as an engine author would run it). */
export function startEngine(fixture: string, args: string[], env: Record<string, string | undefined>): Child {
  return startChild(process.execPath, ['--import', 'tsx', join(here, '..', 'fixtures', `${fixture}.ts`), '--model-path', modelDir, ...args], env);
}

/** The port the worker's system status server bound (it logs it once listening). */
export async function systemPort(worker: Child): Promise<number> {
  return waitFor(
    'the system status server',
    () => {
      const line = worker
        .stderr()
        .split('\n')
        .find((l) => l.includes('system status server listening'));
      return line ? (JSON.parse(line) as { port: number }).port : undefined;
    },
    30_000,
  );
}

/** `EVENT <name> ...` lines the fixture engine printed, as [name, ms, detail]. */
export function events(worker: Child): Array<[string, number, string]> {
  return worker.lines
    .filter((l) => l.startsWith('EVENT '))
    .map((l) => {
      const [, name, ms, ...rest] = l.split(' ');
      return [name!, Number(ms), rest.join(' ')];
    });
}

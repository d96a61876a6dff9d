// dynamo-serve's pure parts: override flags, config layering with Common, GPU plans, the status
// table; and the live table as it appears on a real terminal (a pty from util-linux `script`).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';

import { planGpus } from '../src/gpu-plan.js';
import { graphOf } from '../src/graph.js';
import { depends, endpoint, service } from '../src/index.js';
import { parseOverrideArgs, resolveServices } from '../src/serve-config.js';
import { renderStatus } from '../src/status-table.js';
import { freePort } from '@dynamo/testing/free-port';
import { serveCli } from '@dynamo/testing/dynamo-serve';

@service({ dynamo: { namespace: 'parts' }, config: { model: 'decorator', keep: true } })
class Leaf {
  @endpoint({ request: z.object({}) })
  async *generate() {}
}

@service({ dynamo: { namespace: 'parts' }, workers: 2 })
class Root {
  leaf = depends(Leaf);
  @endpoint({ request: z.object({}) })
  async *generate() {}
}

describe('--Class.key=value overrides', () => {
  it('parse JSON values where they parse, keep text otherwise, and nest dotted keys', () => {
    const { overrides, rest } = parseOverrideArgs([
      '--Leaf.n=3',
      '--Leaf.flag',
      'true',
      '--Leaf.obj={"a":1}',
      '--Leaf.name=plain text',
      '--Leaf.deep.er.key=x',
      '--other',
      'v',
      '--Leaf.ServiceArgs.envs.N=42',
    ]);
    expect(overrides).toEqual({
      Leaf: { n: 3, flag: true, obj: { a: 1 }, name: 'plain text', deep: { er: { key: 'x' } }, ServiceArgs: { envs: { N: '42' } } },
    });
    expect(rest).toEqual(['--other', 'v']);
  });

  it('refuse an empty name part and a missing value', () => {
    expect(() => parseOverrideArgs(['--Leaf..x=1'])).toThrow(/expected --Class\.key=value with non-empty names/);
    expect(() => parseOverrideArgs(['--Leaf.x', '--next'])).toThrow(/--Leaf\.x: needs a value/);
  });
});

describe('config layering', () => {
  const graph = graphOf(Root);

  it('walks depends() from the entry, entry first', () => {
    expect([...graph.services.keys()]).toEqual(['Root', 'Leaf']);
    expect(graph.edges.get('Root')).toEqual(['Leaf']);
  });

  it('fills common-configs keys from Common unless the section sets them; ServiceArgs changes workers and resources', () => {
    const { services } = resolveServices(
      graph,
      { Common: { model: 'common', size: 7 }, Leaf: { 'common-configs': ['model', 'size'], size: 8, ServiceArgs: { workers: 3, resources: { gpu: 2 } } } },
      { Leaf: { extra: 1 } },
    );
    const leaf = services.find((s) => s.name === 'Leaf')!;
    expect(leaf.config).toEqual({ model: 'common', keep: true, size: 8, extra: 1 });
    expect(leaf.workers).toBe(3);
    expect(leaf.resources).toEqual({ cpu: '1', memory: '500Mi', gpu: '2' });
    expect(services.find((s) => s.name === 'Root')!.workers).toBe(2);
  });

  it('names a bad ServiceArgs field', () => {
    expect(() => resolveServices(graph, { Leaf: { ServiceArgs: { workerz: 2 } } }, {})).toThrow(/Leaf\.ServiceArgs: Unrecognized key: "workerz"/);
    expect(() => resolveServices(graph, { Leaf: { ServiceArgs: { resources: { gpu: 'lots' } } } }, {})).toThrow(
      /Leaf\.resources\.gpu: must be a number of GPUs, e\.g\. 1 or 0\.5 \(got "lots"\)/,
    );
  });
});

describe('GPU plans', () => {
  it('give whole GPUs in order, share a device between fractional workers, and say when they oversubscribe', () => {
    const plan = planGpus(
      [
        { service: 'A', workers: 2, gpu: 1 },
        { service: 'B', workers: 3, gpu: 0.5 },
        { service: 'C', workers: 1, gpu: 0 },
      ],
      ['0', '1', '2'],
    );
    expect(plan.devices).toEqual(
      new Map([
        ['A', ['0', '1']],
        ['B', ['2', '2', '0']],
      ]),
    );
    expect(plan.warnings.join()).toMatch(/asks for 4 GPUs and this machine has 3/);
    expect(planGpus([{ service: 'A', workers: 1, gpu: 2 }], ['0', '1'])).toEqual({ devices: new Map([['A', ['0,1']]]), warnings: [] });
  });
});

describe('the status table', () => {
  it('has a row per service with ready instances, restarts and pids', () => {
    const table = renderStatus([
      { service: 'Frontend', index: 1, pid: 10, state: 'ready', restarts: 0, httpUrl: 'http://0.0.0.0:8000' },
      { service: 'Backend', index: 1, pid: 11, state: 'ready', restarts: 2, httpUrl: undefined },
      { service: 'Backend', index: 2, pid: undefined, state: 'restarting', restarts: 1, httpUrl: undefined },
    ]);
    expect(table.split('\n')).toEqual([
      'SERVICE   INSTANCES  RESTARTS  PIDS',
      'Frontend  1/1        0         10    http://0.0.0.0:8000',
      'Backend   1/2        3         11,-  #2 restarting',
    ]);
  });

  it.skipIf(spawnSync('script', ['--version']).status !== 0)('is drawn live on a terminal, and Ctrl-C stops the graph with exit 0', async () => {
    const port = await freePort();
    const kv = mkdtempSync(join(tmpdir(), 'serve-tty-'));
    try {
      const graph = `${join(dirname(fileURLToPath(import.meta.url)), 'fixtures/serve-graph.ts')}#Gateway`;
      // In a pty (sized: a fresh one has 0 rows): start dynamo-serve, wait until its route answers,
      // then send SIGINT as Ctrl-C would.
      const inner = `stty rows 40 cols 160; node ${serveCli} ${graph} --Worker.ServiceArgs.workers=1 --Gateway.port=${port} & pid=$!; for i in $(seq 1 150); do curl -sf -o /dev/null localhost:${port}/call -H 'content-type: application/json' -d '{"n":1}' && break; sleep 0.2; done; sleep 0.5; kill -INT $pid; wait $pid; echo "EXIT $?"`;
      const r = spawnSync('script', ['-qfec', inner, '/dev/null'], {
        cwd: kv,
        env: { ...process.env, CI: '', DYN_FILE_KV: kv, DYN_LOG: 'info', DYN_LOGGING_JSONL: '' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      const screen = stripVTControlCharacters(r.stdout);
      expect(screen).toMatch(/SERVICE\s+INSTANCES\s+RESTARTS\s+PIDS/);
      expect(screen).toMatch(/Worker\s+1\/1\s+0\s+\d+/);
      expect(screen).toMatch(/Gateway\s+1\/1\s+0\s+\d+\s+http:\/\/127\.0\.0\.1:\d+/);
      expect(screen).toContain('EXIT 0');
    } finally {
      rmSync(kv, { recursive: true, force: true });
    }
  });
});

import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogging, levelFor, parseLogFilter } from '../src/logger.js';

describe('DYN_LOG', () => {
  it('parses a default level and target overrides', () => {
    expect(parseLogFilter('debug,runtime.discovery=warn')).toEqual({ level: 'debug', targets: [{ target: 'runtime.discovery', level: 'warn' }] });
    expect(parseLogFilter(undefined).level).toBe('info');
    expect(parseLogFilter('off').level).toBe('silent');
  });

  it('names a bad level', () => {
    expect(() => parseLogFilter('loud')).toThrow(/unknown log level 'loud'/);
  });

  it('applies the longest matching target', () => {
    const filter = parseLogFilter('info,runtime=debug,runtime.discovery.etcd=error');
    expect(levelFor(filter, 'runtime.request-plane')).toBe('debug');
    expect(levelFor(filter, 'runtime.discovery.etcd')).toBe('error');
    expect(levelFor(filter, 'backend')).toBe('info');
  });

  it('writes JSON lines with the component and honours the level', () => {
    const out = new PassThrough();
    const lines: string[] = [];
    out.on('data', (d: Buffer) => lines.push(...d.toString().trim().split('\n')));
    const logging = createLogging({ filter: 'warn,runtime.x=debug', jsonl: true, destination: out });
    logging.child('runtime.y').info('hidden');
    logging.child('runtime.y').warn('shown');
    logging.child('runtime.x').debug({ id: 1 }, 'debugged');
    const parsed = lines.map((l) => JSON.parse(l) as { msg: string; component: string });
    expect(parsed.map((p) => p.msg)).toEqual(['shown', 'debugged']);
    expect(parsed[1]!.component).toBe('runtime.x');
  });
});

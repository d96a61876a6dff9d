import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatHelp, InvalidArgument, parseFlags, workerFlags } from '../src/index.js';

const flags = {
  ...workerFlags,
  maxTokens: { schema: z.coerce.number().int().min(1).default(16), description: 'Max tokens', placeholder: 'N' },
};

describe('parseFlags', () => {
  it('applies defaults', () => {
    const parsed = parseFlags(flags, []);
    expect(parsed.help).toBe(false);
    if (!parsed.help) expect(parsed.values).toMatchObject({ namespace: 'dynamo', maxTokens: 16, requestPlane: 'tcp', disableKvRouting: false });
  });

  it('reads flags, then env, then defaults', () => {
    const parsed = parseFlags(flags, ['--max-tokens', '4', '--disable-kv-routing'], { DYN_NAMESPACE: 'prod', DYN_REQUEST_PLANE: 'nats' });
    if (parsed.help) throw new Error('unexpected help');
    expect(parsed.values).toMatchObject({ namespace: 'prod', requestPlane: 'nats', maxTokens: 4, disableKvRouting: true });
    const flagWins = parseFlags(flags, ['--namespace', 'cli'], { DYN_NAMESPACE: 'env' });
    if (!flagWins.help) expect(flagWins.values.namespace).toBe('cli');
  });

  it('reports help', () => {
    expect(parseFlags(flags, ['--help']).help).toBe(true);
    expect(parseFlags(flags, ['-h']).help).toBe(true);
  });

  it('names the flag or variable that was wrong', () => {
    expect(() => parseFlags(flags, ['--max-tokens', 'lots'])).toThrow(InvalidArgument);
    expect(() => parseFlags(flags, ['--max-tokens', '0'])).toThrow(/--max-tokens/);
    expect(() => parseFlags(flags, ['--nope'])).toThrow(/--nope/);
    expect(() => parseFlags(flags, [], { DYN_REQUEST_PLANE: 'udp' })).toThrow(/DYN_REQUEST_PLANE/);
    expect(() => parseFlags(flags, ['--disaggregation-mode', 'both'])).toThrow(/unknown disaggregation mode 'both'/);
  });
});

describe('formatHelp', () => {
  it('lists every flag with its default and env variable', () => {
    const help = formatHelp('tool [options]', 'Does things.', flags);
    expect(help).toContain('--max-tokens N');
    expect(help).toContain('(default: 16)');
    expect(help).toContain('[env: DYN_NAMESPACE]');
    expect(help).toContain('--disable-kv-routing ');
  });
});

import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { flagsOf, formatHelp, InvalidArgument, parseFlags, workerConfigFromFlags, workerEnvConfig, workerEnvSettings, workerFlags } from '../src/index.js';

const flags = {
  ...workerFlags,
  maxTokens: { schema: z.coerce.number().int().min(1).default(16), description: 'Max tokens', placeholder: 'N' },
};

describe('parseFlags', () => {
  it('applies defaults', () => {
    const parsed = parseFlags(flags, []);
    expect(parsed.help).toBe(false);
    if (!parsed.help) expect(parsed.values).toMatchObject({ namespace: 'dynamo', maxTokens: 16, requestPlane: undefined, disableKvRouting: false });
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
    expect(help).not.toContain('Environment');
  });

  it('lists the settings read from the environment only, after the flags, leaving out variables a flag names', () => {
    const help = formatHelp('tool [options]', 'Does things.', flags, flagsOf(workerEnvSettings));
    const environment = help.slice(help.indexOf('Environment (no flag):'));
    expect(help.indexOf('Environment (no flag):')).toBeGreaterThan(help.indexOf('--help'));
    expect(environment).toMatch(/DYN_LORA_ENABLED=1 +Serve \/v1\/loras/);
    expect(environment).toMatch(/DYN_KV_TRANSFER_MAX_BYTES=BYTES +Largest KV state .* \(default: 4294967296\)/);
    expect(environment).not.toContain('DYN_HEALTH_CHECK_PAYLOAD');
  });
});

describe('workerConfigFromFlags', () => {
  const configOf = (argv: string[], env: Record<string, string> = {}) => {
    const parsed = parseFlags(flags, argv, env);
    if (parsed.help) throw new Error('unexpected help');
    const { maxTokens: _, ...worker } = parsed.values;
    return workerConfigFromFlags(worker, { modelName: '/models/m' });
  };

  it("takes each row's value to its WorkerConfig field, converted, with WorkerConfig's defaults for unset runtime rows", () => {
    const config = configOf(['--dyn-enable-structural-tag', '--disable-kv-routing', '--dyn-tool-call-parser', 'hermes']);
    expect(config).toMatchObject({
      namespace: 'dynamo',
      modelName: '/models/m',
      structuralTagMode: 'on',
      enableKvRouting: false,
      toolCallParser: 'hermes',
      discoveryBackend: 'file',
      requestPlane: 'tcp',
    });
    expect(config.eventPlane).toBeUndefined();
    expect(configOf([]).structuralTagMode).toBe('off');
    expect(configOf([]).enableKvRouting).toBe(true);
  });

  it('takes the runtime rows from their stock variables, a flag beating its variable', () => {
    expect(configOf([], { DYN_EVENT_PLANE: 'nats', DYN_REQUEST_PLANE: 'nats' })).toMatchObject({ eventPlane: 'nats', requestPlane: 'nats' });
    expect(configOf(['--request-plane', 'tcp'], { DYN_REQUEST_PLANE: 'nats' }).requestPlane).toBe('tcp');
  });
});

describe('workerEnvConfig', () => {
  it('reads the environment-only settings with their defaults', () => {
    expect(workerEnvConfig({})).toEqual({
      lora: { enabled: false, cacheDir: undefined },
      kvTransfer: { maxBytes: 4 * 1024 ** 3 },
      health: { payload: undefined },
    });
    expect(
      workerEnvConfig({
        DYN_LORA_ENABLED: 'yes',
        DYN_LORA_PATH: '/data/loras',
        DYN_KV_TRANSFER_MAX_BYTES: '1024',
        DYN_HEALTH_CHECK_PAYLOAD: '{"token_ids":[1]}',
      }),
    ).toEqual({ lora: { enabled: true, cacheDir: '/data/loras' }, kvTransfer: { maxBytes: 1024 }, health: { payload: { token_ids: [1] } } });
  });

  it('names the variable of a bad value', () => {
    expect(() => workerEnvConfig({ DYN_LORA_ENABLED: 'sometimes' })).toThrow(
      /DYN_LORA_ENABLED: expected 1\/0, true\/false, yes\/no or on\/off, got 'sometimes'/,
    );
    expect(() => workerEnvConfig({ DYN_KV_TRANSFER_MAX_BYTES: '-1' })).toThrow(/DYN_KV_TRANSFER_MAX_BYTES/);
    expect(() => workerEnvConfig({ DYN_HEALTH_CHECK_PAYLOAD: '[1]' })).toThrow(/DYN_HEALTH_CHECK_PAYLOAD: must be a JSON object/);
    expect(() => workerEnvConfig({ DYN_HEALTH_CHECK_PAYLOAD: '@/does/not/exist.json' })).toThrow(
      /DYN_HEALTH_CHECK_PAYLOAD: cannot read \/does\/not\/exist.json/,
    );
  });
});

import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const bin = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli.js');

function runWith(env: Record<string, string>, ...args: string[]) {
  const result = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, DYN_NAMESPACE: '', ...env } });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
const run = (...args: string[]) => runWith({}, ...args);

describe('dynamo-sample-engine', () => {
  it('--help lists commands and every option with defaults, exit 0', () => {
    const { code, stdout } = run('--help');
    expect(code).toBe(0);
    for (const text of [
      'serve',
      'conformance',
      'generate',
      '--model-name NAME',
      '--migration-limit N',
      '--health-check-payload JSON|@FILE',
      '--discovery-backend KIND',
      'file (the embedded default',
      '[env: DYN_DISCOVERY_BACKEND]',
      '(default: "sample-model")',
      '--max-tokens N',
      '(default: 16)',
      '--delay-ms MS',
      '(default: 10)',
      '--model-path PATH',
      'Environment (no flag):',
      'DYN_LORA_ENABLED=1',
      'DYN_LORA_PATH=DIR',
      'DYN_KV_TRANSFER_MAX_BYTES=BYTES',
    ]) {
      expect(stdout).toContain(text);
    }
  });

  it('without a command serves, and says what is missing when --model-path is not given, exit 2', () => {
    const { code, stderr } = run();
    expect(code).toBe(2);
    expect(stderr).toContain('model path: WorkerConfig.modelName is empty');
    expect(stderr).toContain('--model-path');
  });

  it('rejects a --health-check-payload that is not a JSON object, naming the flag', () => {
    const { code, stderr } = run('--model-path', '/x', '--health-check-payload', '[1]');
    expect(code).toBe(2);
    expect(stderr).toContain('--health-check-payload: must be a JSON object');
    expect(run('--model-path', '/x', '--health-check-payload', '@/does/not/exist.json').stderr).toContain(
      '--health-check-payload: cannot read /does/not/exist.json',
    );
  });

  it('refuses a bad worker variable before serving, naming it, exit 2', () => {
    const { code, stderr } = runWith({ DYN_LORA_ENABLED: 'sometimes' }, '--model-path', '/x');
    expect(code).toBe(2);
    expect(stderr).toContain("SampleEngine: InvalidArgument: DYN_LORA_ENABLED: expected 1/0, true/false, yes/no or on/off, got 'sometimes'");
    expect(runWith({ DYN_HEALTH_CHECK_PAYLOAD: '[1]' }, '--model-path', '/x').stderr).toContain('DYN_HEALTH_CHECK_PAYLOAD: must be a JSON object');
  });

  it('names an unknown command', () => {
    const { code, stderr } = run('serve-forever');
    expect(code).toBe(2);
    expect(stderr).toContain("unknown command 'serve-forever'");
  });

  it('conformance prints a passing report', () => {
    const { code, stdout } = run('conformance', '--delay-ms', '0');
    expect(code).toBe(0);
    expect(stdout).toMatch(/8 passed, 0 failed: the engine conforms/);
    expect(stdout).toMatch(/ok\s+cancellation/);
  });

  it('conformance of an encode worker applies the encode handoff rules and passes', () => {
    const { code, stdout } = run('conformance', '--delay-ms', '0', '--disaggregation-mode', 'encode');
    expect(code).toBe(0);
    expect(stdout).toContain('an encode worker, checked by the encode handoff rules');
    expect(stdout).toMatch(/8 passed, 0 failed: the engine conforms/);
  });

  it('generate prints the chunks as JSON lines', () => {
    const { code, stdout } = run('generate', '--token-ids', '4,5', '--max-tokens', '2', '--delay-ms', '0');
    expect(code).toBe(0);
    expect(
      stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([
      { token_ids: [1], index: 0 },
      { token_ids: [2], index: 0, finish_reason: 'length', completion_usage: { prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 } },
    ]);
  });

  it('rejects a bad flag value naming the flag, exit 2', () => {
    const { code, stderr } = run('conformance', '--max-tokens', 'many');
    expect(code).toBe(2);
    expect(stderr).toContain('InvalidArgument');
    expect(stderr).toContain('--max-tokens');
  });

  it('rejects bad token ids', () => {
    const { code, stderr } = run('generate', '--token-ids', '1,x');
    expect(code).toBe(2);
    expect(stderr).toContain('--token-ids');
  });
});

/**
 * The coding-agent CLIs (Claude Code, Codex CLI, OpenCode) at their pinned versions, run the way a
 * user runs them against a self-hosted server: each in a fresh HOME and working folder, with no
 * stdin, told only the server's address and the model (and the switches that keep it off the
 * internet: telemetry, update checks, model lists). Everything else is the agent's default.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { commandName, trackProcess, waitingFor } from './processes.js';
import { testingRoot } from './repo.js';

const setupAgents = join(testingRoot, 'agent-clis', 'setup-agents.sh');

/** The agents, by their CLI's name. */
export type AgentName = 'claude' | 'codex' | 'opencode';
export const AGENTS: readonly AgentName[] = ['claude', 'codex', 'opencode'];

/**
 * The folder holding the three CLIs (agent-clis/setup-agents.sh, cached between runs), or `skip`
 * when the npm registry cannot be reached (the tests then report skipped, never passed); any
 * other failure throws. scripts/test.sh installs them once and passes the folder in
 * `DYNAMO_TS_AGENT_CLIS_BIN`.
 */
export function agentClis(): { bin: string } | { skip: string } {
  const checked = process.env.DYNAMO_TS_AGENT_CLIS_BIN;
  if (checked) return { bin: checked };
  const result = spawnSync('bash', [setupAgents, '--print-bin'], { encoding: 'utf8', timeout: 900_000 });
  if (result.status === 3) return { skip: `agent CLIs unavailable (npm registry unreachable): ${result.stderr.trim().split('\n').at(-1)}` };
  if (result.status !== 0) throw new Error(`packages/testing/agent-clis/setup-agents.sh failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return { bin: result.stdout.trim().split('\n').at(-1)! };
}

/** What an agent run printed, and how it ended. */
export interface AgentRun {
  agent: AgentName;
  code: number | null;
  stdout: string;
  stderr: string;
  /** The command line and both streams' tails, for a failure message. */
  report(): string;
}

/** How to reach the server: its base URL (no `/v1`) and the model to ask for. */
export interface AgentTarget {
  url: string;
  model: string;
}

/** Each agent's command, environment and files for one run in `home` / `work`. */
function agentSetup(agent: AgentName, target: AgentTarget, prompt: string, home: string, work: string): { args: string[]; env: Record<string, string> } {
  if (agent === 'claude') {
    return {
      args: ['-p', prompt],
      env: {
        ANTHROPIC_BASE_URL: target.url,
        ANTHROPIC_API_KEY: 'unused',
        ANTHROPIC_MODEL: target.model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
      },
    };
  }
  if (agent === 'codex') {
    mkdirSync(join(home, '.codex'), { recursive: true });
    // Without the last two sections Codex calls GitHub and chatgpt.com (plugins, analytics).
    const config = [
      `model = "${target.model}"`,
      'model_provider = "dynamo"',
      '[model_providers.dynamo]',
      'name = "Dynamo"',
      `base_url = "${target.url}/v1"`,
      'env_key = "DYNAMO_API_KEY"',
      'wire_api = "responses"',
      '[analytics]',
      'enabled = false',
      '[features]',
      'plugins = false',
    ];
    writeFileSync(join(home, '.codex', 'config.toml'), `${config.join('\n')}\n`);
    return { args: ['exec', '--skip-git-repo-check', prompt], env: { CODEX_HOME: join(home, '.codex'), DYNAMO_API_KEY: 'unused' } };
  }
  // OpenCode installs its plugin package into its config folder on every run unless it is there.
  const config = join(home, '.config', 'opencode');
  mkdirSync(join(config, 'node_modules'), { recursive: true });
  writeFileSync(join(config, 'package.json'), JSON.stringify({ dependencies: { '@opencode-ai/plugin': '1.18.33' } }));
  writeFileSync(
    join(config, 'package-lock.json'),
    JSON.stringify({ lockfileVersion: 3, packages: { '': { dependencies: { '@opencode-ai/plugin': '1.18.33' } } } }),
  );
  const provider = {
    npm: '@ai-sdk/openai-compatible',
    name: 'Dynamo',
    options: { baseURL: `${target.url}/v1`, apiKey: 'unused' },
    models: { [target.model]: { name: target.model } },
  };
  writeFileSync(join(work, 'opencode.json'), JSON.stringify({ model: `dynamo/${target.model}`, provider: { dynamo: provider } }));
  return {
    // OpenCode quotes an argument holding a space: the prompt goes word by word, as a shell passes it.
    args: ['run', ...prompt.split(' ')],
    env: {
      XDG_CONFIG_HOME: join(home, '.config'),
      XDG_DATA_HOME: join(home, '.local', 'share'),
      XDG_CACHE_HOME: join(home, '.cache'),
      XDG_STATE_HOME: join(home, '.local', 'state'),
      OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_MODELS_FETCH: '1',
      OPENCODE_DISABLE_SHARE: '1',
    },
  };
}

/**
 * Runs `agent` once with `prompt` against `target`, in a fresh HOME and working folder (removed
 * after), and resolves when it exits, or kills it after `timeoutMs`.
 */
export async function runAgent(bin: string, agent: AgentName, target: AgentTarget, prompt: string, timeoutMs = 120_000): Promise<AgentRun> {
  const root = mkdtempSync(join(tmpdir(), `agent-${agent}-`));
  const [home, work, tmp] = ['home', 'work', 'tmp'].map((d) => join(root, d)) as [string, string, string];
  for (const d of [home, work, tmp]) mkdirSync(d, { recursive: true });
  const { args, env } = agentSetup(agent, target, prompt, home, work);
  const path = [bin, dirname(process.execPath), '/usr/local/bin', '/usr/bin', '/bin'].join(':');
  const child: ChildProcess = spawn(join(bin, agent), args, {
    cwd: work,
    env: { PATH: path, HOME: home, TMPDIR: tmp, LANG: 'C.UTF-8', TERM: 'dumb', SHELL: '/bin/bash', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackProcess(commandName(agent, args), child);
  const done = waitingFor(`${agent} to finish its session`);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  clearTimeout(timer);
  done();
  rmSync(root, { recursive: true, force: true });
  return {
    agent,
    code,
    stdout,
    stderr,
    report: () => `${agent} ${args.join(' ')} exited ${code}\n── stdout (tail)\n${stdout.slice(-3000)}\n── stderr (tail)\n${stderr.slice(-3000)}`,
  };
}

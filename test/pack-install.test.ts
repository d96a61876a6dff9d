// The published packages, used the way an outside engine author would: `pnpm pack` @dynamo/core,
// @dynamo/runtime, @dynamo/llm and @dynamo/backend, install the tarballs with npm into a fresh project outside the workspace, and
// type-check and test a small engine there against them. Nothing here is skipped: a broken tarball,
// install, type or test run fails the test with the child's output.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFORMANCE_CHECKS } from '@dynamo/backend';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '..');
const corePkgDir = join(repoRoot, 'packages', 'core');
const backendPkgDir = join(repoRoot, 'packages', 'backend');
const runtimePkgDir = join(repoRoot, 'packages', 'runtime');
const llmPkgDir = join(repoRoot, 'packages', 'llm');
const fixtureDir = join(here, 'fixtures', 'consumer');
/** Set DYNAMO_TESTS_KEEP_TMP=1 to keep the tarballs and the scratch project for debugging. */
const keepTmp = process.env.DYNAMO_TESTS_KEEP_TMP === '1';

interface RunResult {
  command: string;
  cwd: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a command to completion; never throws (a spawn error lands in `stderr`, `code` null). */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 240_000): Promise<RunResult> {
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const finish = (code: number | null, signal: NodeJS.Signals | null) =>
      done({ command: [cmd, ...args].join(' '), cwd, code, signal, stdout, stderr, ms: Date.now() - started });
    child.on('error', (err) => {
      stderr += `\n[spawn error] ${err.message}`;
      finish(null, null);
    });
    child.on('close', finish);
  });
}

/** The child's whole story, for assertion messages. */
function describeRun(r: RunResult): string {
  const tail = (s: string) => (s.length > 20_000 ? `...${s.slice(-20_000)}` : s);
  return [
    `$ ${r.command}   (in ${r.cwd})`,
    `exit code ${r.code}${r.signal ? `, signal ${r.signal}` : ''} after ${r.ms} ms`,
    `--- stdout ---\n${tail(r.stdout)}`,
    `--- stderr ---\n${tail(r.stderr)}`,
  ].join('\n');
}

function expectSuccess(r: RunResult): void {
  expect(r.code, describeRun(r)).toBe(0);
}

/**
 * The environment an outside user's shell would have: none of the variables pnpm, turbo or this
 * vitest run inject, and no PATH entry inside the workspace (so `tsc`, `vitest` and friends can
 * only come from the scratch project's own node_modules).
 */
function outsideEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (/^(npm_(package|lifecycle)_|npm_command$|npm_execpath$|npm_node_execpath$|npm_config_user_agent$)/.test(key)) continue;
    if (/^(npm_config_|pnpm_config_)verify_deps_before_run$/.test(key)) continue;
    if (/^(PNPM_|VITEST|TURBO_|__VITEST)/.test(key) || ['NODE_OPTIONS', 'NODE_PATH', 'NODE_ENV', 'INIT_CWD', 'TEST'].includes(key)) continue;
    env[key] = value;
  }
  env.PATH = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((p) => p !== '' && !isInside(repoRoot, resolve(p)))
    .join(delimiter);
  env.NO_COLOR = '1';
  env.FORCE_COLOR = '0';
  env.npm_config_update_notifier = 'false';
  return env;
}

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

async function tarEntries(tarball: string): Promise<string[]> {
  const r = await run('tar', ['-tzf', tarball], dirname(tarball), process.env);
  expectSuccess(r);
  return r.stdout.split('\n').filter((line) => line !== '');
}

async function tarPackageJson(tarball: string): Promise<Record<string, unknown> & { version: string }> {
  const r = await run('tar', ['-xzOf', tarball, 'package/package.json'], dirname(tarball), process.env);
  expectSuccess(r);
  return JSON.parse(r.stdout) as Record<string, unknown> & { version: string };
}

/** Every file an `exports` map (or main/types) points at; all must be in the tarball. */
function exportTargets(pkg: Record<string, unknown>): string[] {
  const targets = new Set<string>();
  const walk = (value: unknown): void => {
    if (typeof value === 'string') targets.add(value);
    else if (value !== null && typeof value === 'object') Object.values(value).forEach(walk);
  };
  walk(pkg.exports);
  walk(pkg.main);
  walk(pkg.types);
  return [...targets].map((t) => `package/${t.replace(/^\.\//, '')}`);
}

/** The file name napi-rs gives this machine's binary (`dynamo-core.linux-x64-gnu.node`, ...). */
function nativeBinaryName(): string {
  const { platform, arch } = process;
  if (platform !== 'linux') return `dynamo-core.${platform}-${arch}.node`;
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return `dynamo-core.linux-${arch}-${header?.glibcVersionRuntime ? 'gnu' : 'musl'}.node`;
}

function readJson<T = Record<string, unknown>>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

const rootPkg = readJson<{ devDependencies: Record<string, string> }>(join(repoRoot, 'package.json'));
const backendPkg = readJson<{ dependencies: Record<string, string> }>(join(backendPkgDir, 'package.json'));

/** Vitest's JSON reporter, the fields this test reads. */
interface VitestJsonReport {
  success: boolean;
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: { name: string; status: string; assertionResults: { fullName: string; status: string }[] }[];
}

describe('the packed packages, installed by an outside project with npm', () => {
  let packDir: string;
  let scratchDir: string;
  let coreTarball: string;
  let backendTarball: string;
  let runtimeTarball: string;
  let llmTarball: string;
  let installed: RunResult | undefined;
  const env = outsideEnv();

  /** Later steps need the install; if it failed, they fail too (pointing at it), never skip. */
  function requireInstall(): void {
    if (installed === undefined || installed.code !== 0) {
      throw new Error(`npm install in the scratch project did not succeed, see the install test${installed ? `\n${describeRun(installed)}` : ''}`);
    }
  }

  beforeAll(async () => {
    for (const [dir, built] of [
      [corePkgDir, nativeBinaryName()],
      [backendPkgDir, 'dist/index.js'],
      [runtimePkgDir, 'dist/index.js'],
      [llmPkgDir, 'dist/index.js'],
    ] as const) {
      if (!existsSync(join(dir, built))) {
        throw new Error(`${join(dir, built)} is missing: build the workspace first (pnpm turbo run build)`);
      }
    }
    packDir = realpathSync(mkdtempSync(join(tmpdir(), 'dynamo-pack-')));
    scratchDir = realpathSync(mkdtempSync(join(tmpdir(), 'dynamo-outside-user-')));
    for (const dir of [corePkgDir, runtimePkgDir, llmPkgDir, backendPkgDir]) {
      const r = await run('pnpm', ['pack', '--pack-destination', packDir], dir, { ...process.env, npm_config_update_notifier: 'false' });
      expectSuccess(r);
    }
    const tarballs = readdirSync(packDir);
    const find = (prefix: string) => {
      const hits = tarballs.filter((f) => f.startsWith(prefix) && f.endsWith('.tgz'));
      if (hits.length !== 1) throw new Error(`expected one ${prefix}*.tgz in ${packDir}, found: ${tarballs.join(', ')}`);
      return join(packDir, hits[0]!);
    };
    coreTarball = find('dynamo-core-');
    backendTarball = find('dynamo-backend-');
    runtimeTarball = find('dynamo-runtime-');
    llmTarball = find('dynamo-llm-');
  });

  afterAll(() => {
    if (keepTmp) {
      console.log(`kept ${packDir} and ${scratchDir}`);
      return;
    }
    for (const dir of [packDir, scratchDir]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('@dynamo/core ships the native binary, the loader and its types', async () => {
    const entries = await tarEntries(coreTarball);
    expect(entries).toEqual(expect.arrayContaining(['package/package.json', 'package/index.js', 'package/index.d.ts', `package/${nativeBinaryName()}`]));
    // Every binary built into the package directory goes out (`files: ["*.node"]`).
    const builtBinaries = readdirSync(corePkgDir).filter((f) => f.endsWith('.node'));
    expect(entries).toEqual(expect.arrayContaining(builtBinaries.map((f) => `package/${f}`)));
    const pkg = await tarPackageJson(coreTarball);
    expect(entries).toEqual(expect.arrayContaining(exportTargets(pkg)));
    expect(JSON.stringify(pkg)).not.toContain('workspace:');
    expect(entries.filter((e) => /(^|\/)(test|src)\/|\.test\.|\.spec\./.test(e))).toEqual([]);
  });

  it('@dynamo/backend ships dist (with types and the vitest entry) and no tests', async () => {
    const entries = await tarEntries(backendTarball);
    expect(entries).toEqual(
      expect.arrayContaining([
        'package/package.json',
        'package/dist/index.js',
        'package/dist/index.d.ts',
        'package/dist/vitest.js',
        'package/dist/vitest.d.ts',
      ]),
    );
    const pkg = await tarPackageJson(backendTarball);
    expect(entries).toEqual(expect.arrayContaining(exportTargets(pkg)));
    expect(entries.filter((e) => /(^|\/)(test|tests|__tests__)\/|\.(test|spec)\.[cm]?[jt]sx?$/.test(e))).toEqual([]);
    expect(entries.filter((e) => e.endsWith('.map'))).toEqual([]);
    expect(entries.filter((e) => !e.startsWith('package/dist/') && !/^package\/(package\.json|README[^/]*|LICEN[CS]E[^/]*|CHANGELOG[^/]*)$/i.test(e))).toEqual([]);
    // pnpm pack replaced the workspace protocol with the version it links to.
    expect(JSON.stringify(pkg)).not.toContain('workspace:');
    const coreVersion = (await tarPackageJson(coreTarball)).version;
    expect((pkg.dependencies as Record<string, string>)['@dynamo/core']).toBe(coreVersion);
  });

  it('installs into a fresh project outside the workspace with npm', async () => {
    expect(isInside(repoRoot, scratchDir), `${scratchDir} must be outside ${repoRoot}`).toBe(false);
    cpSync(fixtureDir, scratchDir, { recursive: true });
    const coreSpec = `file:${coreTarball}`;
    const runtimeSpec = `file:${runtimeTarball}`;
    const llmSpec = `file:${llmTarball}`;
    const manifest = {
      name: 'dynamo-outside-user',
      version: '0.0.0',
      private: true,
      type: 'module',
      scripts: {
        test: 'vitest run',
        typecheck: 'tsc --noEmit',
        smoke: 'node smoke.mjs',
      },
      dependencies: {
        '@dynamo/backend': `file:${backendTarball}`,
        '@dynamo/core': coreSpec,
        '@dynamo/runtime': runtimeSpec,
        '@dynamo/llm': llmSpec,
        zod: backendPkg.dependencies.zod,
      },
      devDependencies: {
        '@types/node': rootPkg.devDependencies['@types/node'],
        typescript: rootPkg.devDependencies.typescript,
        vitest: rootPkg.devDependencies.vitest,
      },
      // @dynamo/backend depends on @dynamo/core, @dynamo/runtime and @dynamo/llm by version: never let
      // those come from the registry.
      overrides: { '@dynamo/core': coreSpec, '@dynamo/runtime': runtimeSpec, '@dynamo/llm': llmSpec },
    };
    writeFileSync(join(scratchDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

    installed = await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], scratchDir, env, 280_000);
    expectSuccess(installed);

    // @dynamo/core came from our tarball, once, with its binary.
    const lock = readJson<{ packages: Record<string, { resolved?: string; version?: string }> }>(join(scratchDir, 'package-lock.json'));
    const coreEntries = Object.entries(lock.packages).filter(([key]) => key.endsWith('node_modules/@dynamo/core'));
    expect(coreEntries.map(([key]) => key)).toEqual(['node_modules/@dynamo/core']);
    expect(coreEntries[0]![1].resolved ?? '', JSON.stringify(coreEntries)).toMatch(/^file:.*dynamo-core-[^/]+\.tgz$/);
    const backendEntry = lock.packages['node_modules/@dynamo/backend'];
    expect(backendEntry?.resolved ?? '', JSON.stringify(backendEntry)).toMatch(/^file:.*dynamo-backend-[^/]+\.tgz$/);
    expect(existsSync(join(scratchDir, 'node_modules', '@dynamo', 'core', nativeBinaryName()))).toBe(true);
  });

  it('the published .d.ts files type-check for a strict NodeNext consumer (tsc --noEmit)', async () => {
    requireInstall();
    const r = await run('npm', ['run', '--silent', 'typecheck'], scratchDir, env);
    expectSuccess(r);
  });

  it('the packages load in plain Node (ESM entry points and native binding)', async () => {
    requireInstall();
    const r = await run('npm', ['run', '--silent', 'smoke'], scratchDir, env);
    expectSuccess(r);
    expect(r.stdout, describeRun(r)).toContain(`smoke ok: ${CONFORMANCE_CHECKS.length} checks passed, binding native`);
  });

  it("the project's own vitest suite passes: runConformance and conformanceSuite", async () => {
    requireInstall();
    const reportFile = join(scratchDir, 'vitest-report.json');
    const r = await run('npm', ['test', '--', '--reporter=default', '--reporter=json', `--outputFile.json=${reportFile}`], scratchDir, env);
    expectSuccess(r);
    const out = `${r.stdout}\n${r.stderr}`;
    // 3 tests in tiny-engine.test.ts, one per conformance check from conformanceSuite.
    const expected = 3 + CONFORMANCE_CHECKS.length;
    expect(out, describeRun(r)).toMatch(/Test Files\s+2 passed \(2\)/);
    expect(out, describeRun(r)).toMatch(new RegExp(`Tests\\s+${expected} passed \\(${expected}\\)`));

    expect(existsSync(reportFile), describeRun(r)).toBe(true);
    const report = readJson<VitestJsonReport>(reportFile);
    const summary = JSON.stringify({ ...report, testResults: report.testResults.map((t) => ({ ...t, assertionResults: t.assertionResults.map((a) => `${a.status} ${a.fullName}`) })) }, null, 2);
    expect(report, summary).toMatchObject({
      success: true,
      numTotalTests: expected,
      numPassedTests: expected,
      numFailedTests: 0,
      numPendingTests: 0,
      numTodoTests: 0,
    });
    const passed = report.testResults.flatMap((t) => t.assertionResults.filter((a) => a.status === 'passed').map((a) => a.fullName));
    expect(passed, summary).toEqual(
      expect.arrayContaining([
        'TinyEngine passes runConformance',
        'TinyEngine is rejected by runConformance when it breaks the contract',
        ...CONFORMANCE_CHECKS.map((check) => `TinyEngine conformance ${check}`),
      ]),
    );
  });
});

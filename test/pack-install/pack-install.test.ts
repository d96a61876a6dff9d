// The release, used the way an outside engine author would: the tarballs `pnpm release:pack`
// made (after `pnpm release:build`) are installed into a fresh project outside the workspace with
// npm, pnpm and yarn, with no Rust toolchain on PATH, and a small engine there is type-checked,
// run in plain Node and tested with its own vitest suite (runConformance and conformanceSuite).
// Nothing here is skipped: a broken tarball, install, type or test run fails with the child's output.
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONFORMANCE_CHECKS } from '@dynamo/backend';

import { commandName, trackProcess } from '@dynamo/testing/processes';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '..', '..');
const releaseDir = join(repoRoot, 'release');
const fixtureDir = join(here, '..', 'fixtures', 'consumer');
/** Set DYNAMO_TESTS_KEEP_TMP=1 to keep the scratch projects for debugging. */
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
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 280_000): Promise<RunResult> {
  const started = Date.now();
  return new Promise((done) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs, killSignal: 'SIGKILL' });
    trackProcess(commandName(cmd, args), child);
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

function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

const RUST_TOOLS = ['cargo', 'rustc', 'rustup'];

/**
 * The environment an outside user's shell would have: this Node first on PATH, none of the
 * variables pnpm, turbo or this vitest run inject, no PATH entry inside the workspace (so `tsc`,
 * `vitest` and friends can only come from the scratch project) and no Rust toolchain.
 */
function outsideEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value === undefined) continue;
    if (/^(npm_|pnpm_|PNPM_|VITEST|TURBO_|__VITEST|CARGO|RUSTUP)/i.test(key)) continue;
    if (['NODE_OPTIONS', 'NODE_PATH', 'NODE_ENV', 'INIT_CWD', 'TEST'].includes(key)) continue;
    env[key] = value;
  }
  const path = (process.env.PATH ?? '')
    .split(delimiter)
    .filter((p) => p !== '' && !isInside(repoRoot, resolve(p)))
    .filter((p) => !RUST_TOOLS.some((tool) => existsSync(join(p, tool))));
  env.PATH = [dirname(process.execPath), ...path].join(delimiter);
  env.NO_COLOR = '1';
  env.FORCE_COLOR = '0';
  env.npm_config_update_notifier = 'false';
  env.YARN_ENABLE_TELEMETRY = '0';
  return env;
}

function readJson<T = Record<string, unknown>>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** One tarball of the release, as release/packages.json lists it. */
interface Packed {
  name: string;
  version: string;
  file: string;
  platform?: string;
}

const packagesFile = join(releaseDir, 'packages.json');
if (!existsSync(packagesFile)) throw new Error(`${packagesFile} is missing: run pnpm release:build and pnpm release:pack first`);
const released = readJson<Packed[]>(packagesFile);
const tarball = (name: string) => {
  const hit = released.find((p) => p.name === name);
  if (!hit) throw new Error(`${name} is not in ${packagesFile}`);
  return join(releaseDir, hit.file);
};
const report = process.report.getReport() as { header: { glibcVersionRuntime?: string } };
const platform =
  process.platform === 'linux' ? `linux-${process.arch}-${report.header.glibcVersionRuntime ? 'gnu' : 'musl'}` : `${process.platform}-${process.arch}`;
const rootPkg = readJson<{ devDependencies: Record<string, string> }>(join(repoRoot, 'package.json'));
const backendPkg = readJson<{ dependencies: Record<string, string> }>(join(repoRoot, 'packages', 'backend', 'package.json'));
const corePkg = readJson<{ version: string; napi: { targets: string[] } }>(join(repoRoot, 'packages', 'core', 'package.json'));
// The vite this workspace's vitest runs on. The outside project pins it: a vite release that
// names a dependency the registry cannot serve (8.4.0's optional `napi-windows-process-start-time`)
// stops Yarn, which resolves optional dependencies strictly, and says nothing about our tarballs.
const vitestManifest = createRequire(import.meta.url).resolve('vitest/package.json');
const viteVersion = readJson<{ version: string }>(createRequire(vitestManifest).resolve('vite/package.json')).version;

async function tarEntries(file: string): Promise<string[]> {
  const r = await run('tar', ['-tzf', file], dirname(file), process.env);
  expectSuccess(r);
  return r.stdout.split('\n').filter((line) => line !== '');
}

async function tarPackageJson(file: string): Promise<Record<string, unknown> & { version: string }> {
  const r = await run('tar', ['-xzOf', file, 'package/package.json'], dirname(file), process.env);
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

describe('the release tarballs', () => {
  const platformPackages = released.filter((p) => p.platform !== undefined);

  // A release packs all six; CI packs this platform's alone unless the native inputs changed.
  it("hold a platform package for this platform (in napi.targets order, at @dynamo/core's version)", () => {
    const all = ['linux-x64-gnu', 'linux-arm64-gnu', 'linux-x64-musl', 'linux-arm64-musl', 'darwin-arm64', 'darwin-x64'];
    expect(corePkg.napi.targets).toHaveLength(all.length);
    expect(platformPackages.map((p) => p.platform)).toContain(platform);
    expect(platformPackages.map((p) => p.platform)).toEqual(all.filter((name) => platformPackages.some((p) => p.platform === name)));
    for (const p of released) expect(p.version, p.name).toBe(corePkg.version);
  });

  it('@dynamo/core ships the loader and types, no binary, and names every platform package', async () => {
    const file = tarball('@dynamo/core');
    const entries = await tarEntries(file);
    expect(entries).toEqual(
      expect.arrayContaining([
        'package/package.json',
        'package/index.js',
        'package/load-native.js',
        'package/platforms.js',
        'package/binding.js',
        'package/index.d.ts',
      ]),
    );
    expect(entries.filter((e) => e.endsWith('.node'))).toEqual([]);
    const pkg = await tarPackageJson(file);
    expect(entries).toEqual(expect.arrayContaining(exportTargets(pkg)));
    expect(pkg.optionalDependencies).toEqual(Object.fromEntries(platformPackages.map((p) => [p.name, corePkg.version])));
    expect(pkg).not.toHaveProperty('scripts');
    expect(pkg).not.toHaveProperty('devDependencies');
  });

  it('each platform package declares its os, cpu and libc and ships its one binary', async () => {
    for (const p of platformPackages) {
      const [os, cpu, libc] = p.platform!.split('-');
      const file = tarball(p.name);
      const pkg = await tarPackageJson(file);
      expect(pkg, p.name).toMatchObject({ name: p.name, version: corePkg.version, os: [os], cpu: [cpu], main: `dynamo-core.${p.platform}.node` });
      if (libc) expect(pkg.libc, p.name).toEqual([libc === 'gnu' ? 'glibc' : 'musl']);
      const entries = await tarEntries(file);
      expect(
        entries.filter((e) => e.endsWith('.node')),
        p.name,
      ).toEqual([`package/dynamo-core.${p.platform}.node`]);
      expect(entries, p.name).toContain('package/LICENSE');
    }
  });

  it('@dynamo/backend ships dist (with types and the vitest entry) and no tests', async () => {
    const file = tarball('@dynamo/backend');
    const entries = await tarEntries(file);
    expect(entries).toEqual(
      expect.arrayContaining([
        'package/package.json',
        'package/dist/index.js',
        'package/dist/index.d.ts',
        'package/dist/vitest.js',
        'package/dist/vitest.d.ts',
      ]),
    );
    const pkg = await tarPackageJson(file);
    expect(entries).toEqual(expect.arrayContaining(exportTargets(pkg)));
    expect(entries.filter((e) => /(^|\/)(test|tests|__tests__)\/|\.(test|spec)\.[cm]?[jt]sx?$/.test(e))).toEqual([]);
    expect(entries.filter((e) => e.endsWith('.map'))).toEqual([]);
    expect(entries.filter((e) => !e.startsWith('package/dist/') && !/^package\/(package\.json|README[^/]*|LICEN[CS]E[^/]*|CHANGELOG[^/]*)$/i.test(e))).toEqual(
      [],
    );
    // pnpm pack replaced the workspace protocol with the version it links to.
    expect(JSON.stringify(pkg)).not.toContain('workspace:');
    expect((pkg.dependencies as Record<string, string>)['@dynamo/core']).toBe(corePkg.version);
  });
});

/** How each package manager is run, and how it pins a dependency to a local tarball. */
const managers = {
  npm: {
    bin: ['npm'],
    install: ['install', '--no-audit', '--no-fund'],
    runArgs: (script: string, args: string[]) => ['run', '--silent', script, ...(args.length ? ['--', ...args] : [])],
    pin: (specs: Record<string, string>) => ({ overrides: specs }),
    files: {} as Record<string, string>,
  },
  pnpm: {
    // The pnpm running this suite (bootstrap.sh installs it into .tools/ unless it is on PATH already).
    bin: [
      process.execPath,
      process.env.npm_execpath?.endsWith('pnpm.cjs') ? process.env.npm_execpath : join(repoRoot, '.tools', 'node_modules', 'pnpm', 'bin', 'pnpm.cjs'),
    ],
    install: ['install'],
    runArgs: (script: string, args: string[]) => ['run', '--silent', script, ...args],
    pin: (specs: Record<string, string>) => ({ pnpm: { overrides: specs } }),
    files: {} as Record<string, string>,
  },
  yarn: {
    bin: [process.execPath, createRequire(import.meta.url).resolve('@yarnpkg/cli-dist/bin/yarn.js')],
    // Under CI=true Yarn refuses to write a new lockfile unless told it may.
    install: ['install', '--no-immutable'],
    runArgs: (script: string, args: string[]) => ['run', script, ...args],
    pin: (specs: Record<string, string>) => ({ resolutions: specs }),
    // Yarn 4's defaults (Plug'n'Play, no node_modules), with telemetry off.
    files: { '.yarnrc.yml': 'enableTelemetry: false\n' } as Record<string, string>,
  },
};

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

for (const [manager, pm] of Object.entries(managers)) {
  describe(`an outside project installs @dynamo/backend with ${manager} (Node ${process.version}, no Rust toolchain)`, () => {
    let scratchDir: string;
    let installed: RunResult | undefined;
    const env = outsideEnv();
    const exec = (args: string[]) => run(pm.bin[0]!, [...pm.bin.slice(1), ...args], scratchDir, env);

    /** Later steps need the install; if it failed, they fail too (pointing at it), never skip. */
    function requireInstall(): void {
      if (installed?.code !== 0) throw new Error(`${manager} install did not succeed, see the install test${installed ? `\n${describeRun(installed)}` : ''}`);
    }

    beforeAll(() => {
      scratchDir = realpathSync(mkdtempSync(join(tmpdir(), `dynamo-outside-${manager}-`)));
    });

    afterAll(() => {
      if (keepTmp) console.log(`kept ${scratchDir}`);
      else if (scratchDir) rmSync(scratchDir, { recursive: true, force: true });
    });

    it('has no Rust toolchain on PATH', async () => {
      const r = await run('sh', ['-c', `for t in ${RUST_TOOLS.join(' ')}; do command -v $t && exit 1; done; exit 0`], tmpdir(), env);
      expectSuccess(r);
    });

    it(`installs every @dynamo package from the tarballs, with the ${platform} binary`, async () => {
      expect(isInside(repoRoot, scratchDir), `${scratchDir} must be outside ${repoRoot}`).toBe(false);
      cpSync(fixtureDir, scratchDir, { recursive: true });
      for (const [name, text] of Object.entries(pm.files)) writeFileSync(join(scratchDir, name), text);
      // Every @dynamo package resolves to its tarball, never to the registry.
      const specs = Object.fromEntries(released.map((p) => [p.name, `file:${join(releaseDir, p.file)}`]));
      const manifest = {
        name: 'dynamo-outside-user',
        version: '0.0.0',
        private: true,
        type: 'module',
        scripts: { test: 'vitest run', typecheck: 'tsc --noEmit', smoke: 'node smoke.mjs' },
        dependencies: { '@dynamo/backend': specs['@dynamo/backend'], '@dynamo/core': specs['@dynamo/core'], zod: backendPkg.dependencies.zod },
        devDependencies: {
          '@types/node': rootPkg.devDependencies['@types/node'],
          typescript: rootPkg.devDependencies.typescript,
          vitest: rootPkg.devDependencies.vitest,
        },
        ...pm.pin({ ...specs, vite: viteVersion }),
      };
      writeFileSync(join(scratchDir, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);

      installed = await exec(pm.install);
      expectSuccess(installed);
      const lockfile = ['package-lock.json', 'pnpm-lock.yaml', 'yarn.lock'].map((f) => join(scratchDir, f)).find(existsSync);
      expect(lockfile, `${manager} wrote no lockfile`).toBeDefined();
      const lock = readFileSync(lockfile!, 'utf8');
      expect(lock.match(/https?:\/\/[^\s"']*\/@dynamo\/[^\s"']*/g) ?? [], 'an @dynamo package came from a registry').toEqual([]);
      // What @dynamo/backend needs, each from its tarball (a lockfile names the file it came from).
      for (const name of ['@dynamo/backend', '@dynamo/core', '@dynamo/runtime', '@dynamo/llm', `@dynamo/core-${platform}`]) {
        expect(lock, name).toContain(released.find((p) => p.name === name)!.file);
      }
    });

    it('the published .d.ts files type-check for a strict NodeNext consumer (tsc --noEmit)', async () => {
      requireInstall();
      expectSuccess(await exec(pm.runArgs('typecheck', [])));
    });

    it(`the packages load in plain Node, with @dynamo/core-${platform}'s binary`, async () => {
      requireInstall();
      const r = await exec(pm.runArgs('smoke', []));
      expectSuccess(r);
      expect(r.stdout, describeRun(r)).toContain(`smoke ok: ${CONFORMANCE_CHECKS.length} checks passed, binding native`);
      expect(r.stdout, describeRun(r)).toContain(`native binary: @dynamo/core-${platform}@${corePkg.version}`);
    });

    it("the project's own vitest suite passes: runConformance and conformanceSuite", async () => {
      requireInstall();
      const reportFile = join(scratchDir, 'vitest-report.json');
      const r = await exec(pm.runArgs('test', ['--reporter=default', '--reporter=json', `--outputFile.json=${reportFile}`]));
      expectSuccess(r);
      // 3 tests in tiny-engine.test.ts, one per conformance check from conformanceSuite.
      const expected = 3 + CONFORMANCE_CHECKS.length;
      expect(existsSync(reportFile) && statSync(reportFile).size > 0, describeRun(r)).toBe(true);
      const vitest = readJson<VitestJsonReport>(reportFile);
      const summary = JSON.stringify(
        { ...vitest, testResults: vitest.testResults.map((t) => ({ ...t, assertionResults: t.assertionResults.map((a) => `${a.status} ${a.fullName}`) })) },
        null,
        2,
      );
      expect(vitest, summary).toMatchObject({
        success: true,
        numTotalTests: expected,
        numPassedTests: expected,
        numFailedTests: 0,
        numPendingTests: 0,
        numTodoTests: 0,
      });
      const passed = vitest.testResults.flatMap((t) => t.assertionResults.filter((a) => a.status === 'passed').map((a) => a.fullName));
      expect(passed, summary).toEqual(
        expect.arrayContaining([
          'TinyEngine passes runConformance',
          'TinyEngine is rejected by runConformance when it breaks the contract',
          ...CONFORMANCE_CHECKS.map((check) => `TinyEngine conformance ${check}`),
        ]),
      );
    });
  });
}

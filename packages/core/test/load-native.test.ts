// How @dynamo/core finds its native binary once installed: from the platform package
// (@dynamo/core-<platform>), and with an error naming the platform when none fits.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// The package as resolved by name: this folder in the workspace, or an installed release.
const pkgDir = dirname(createRequire(import.meta.url).resolve('@dynamo/core/package.json'));
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version: string; files: string[] };
const report = process.report.getReport() as { header: { glibcVersionRuntime?: string } };
const platform =
  process.platform === 'linux' ? `linux-${process.arch}-${report.header.glibcVersionRuntime ? 'gnu' : 'musl'}` : `${process.platform}-${process.arch}`;
// The binary in use: a local build next to the loader, else the installed platform package's.
const localBinary = join(pkgDir, `dynamo-core.${platform}.node`);
const binary = existsSync(localBinary) ? localBinary : createRequire(join(pkgDir, 'package.json')).resolve(`@dynamo/core-${platform}`);
const scratch = mkdtempSync(join(tmpdir(), 'dynamo-core-load-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Outcome {
  ok: boolean;
  message: string;
}

/**
 * A project whose node_modules holds @dynamo/core as published (its `files`, no binary inside)
 * and, when given, a platform package; it imports @dynamo/core in a fresh Node.
 */
async function importInstalled(name: string, platformPkg?: { version: string; binary: 'real' | 'garbage' }, nodeArgs: string[] = []): Promise<Outcome> {
  const project = join(scratch, name);
  const core = join(project, 'node_modules', '@dynamo', 'core');
  mkdirSync(core, { recursive: true });
  for (const file of pkg.files) copyFileSync(join(pkgDir, file), join(core, file));
  copyFileSync(join(pkgDir, 'package.json'), join(core, 'package.json'));
  if (platformPkg) {
    const dir = join(project, 'node_modules', '@dynamo', `core-${platform}`);
    mkdirSync(dir, { recursive: true });
    const main = `dynamo-core.${platform}.node`;
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `@dynamo/core-${platform}`, version: platformPkg.version, main }));
    if (platformPkg.binary === 'real') symlinkSync(binary, join(dir, main));
    else writeFileSync(join(dir, main), 'not an ELF or Mach-O file');
  }
  const script = `import('@dynamo/core').then(
    (core) => console.log(JSON.stringify({ ok: true, message: typeof core.runConformance })),
    (e) => console.log(JSON.stringify({ ok: false, message: e.code + ': ' + e.message })))`;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [...nodeArgs, '-e', script],
      { cwd: project, env: { ...process.env, NAPI_RS_NATIVE_LIBRARY_PATH: '' } },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout) as Outcome);
      },
    );
  });
}

describe('@dynamo/core installed from its packages', () => {
  it(`loads the binary from @dynamo/core-${platform}`, async () => {
    expect(await importInstalled('from-platform-package', { version: pkg.version, binary: 'real' })).toEqual({ ok: true, message: 'function' });
  });

  it('names the platform and the package to install when the platform package is missing', async () => {
    const { ok, message } = await importInstalled('no-platform-package');
    expect(ok).toBe(false);
    expect(message).toContain(
      `DYNAMO_NATIVE_BINARY: @dynamo/core: the native binary for ${platform} (Node ${process.version}) is missing: install @dynamo/core-${platform}@${pkg.version}`,
    );
    expect(message).toContain('--omit=optional');
  });

  it('refuses a platform package of another version', async () => {
    const { ok, message } = await importInstalled('old-platform-package', { version: '0.0.1', binary: 'real' });
    expect(ok).toBe(false);
    expect(message).toContain(`@dynamo/core-${platform} is 0.0.1 but @dynamo/core is ${pkg.version}`);
  });

  it('says which binary failed to load, and why', async () => {
    const { ok, message } = await importInstalled('broken-binary', { version: pkg.version, binary: 'garbage' });
    expect(ok).toBe(false);
    expect(message).toContain(`@dynamo/core-${platform}@${pkg.version} is installed but did not load on ${platform}`);
    expect(message).toMatch(/invalid ELF header|exec format error|not a mach-o file|file too short/i);
  });

  it('lists the platforms with prebuilt binaries on any other', async () => {
    const riscv = `--import=data:text/javascript,Object.defineProperty(process, 'arch', { value: 'riscv64' })`;
    const { ok, message } = await importInstalled('unsupported-platform', undefined, [riscv]);
    expect(ok).toBe(false);
    const expected = process.platform === 'linux' ? `linux-riscv64-${platform.split('-')[2]}` : `${process.platform}-riscv64`;
    expect(message).toContain(`no prebuilt native binary for ${expected}`);
    expect(message).toContain('linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-arm64, darwin-x64');
  });
});

// pnpm release:pack [--out <dir>]
// Packs every public package into release/: one @dynamo/core-<platform> per released platform,
// @dynamo/core naming them as optionalDependencies at its own version, and the other packages
// with pnpm pack (workspace: versions resolved). release/packages.json lists the tarballs in the
// order they must be published.
import { copyFileSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { targets } from '../../packages/core/platforms.js';
import { binaryFormat, expectedFormat } from './binary-format.mjs';
import { cli, coreDir, npmDir, npmEnv, publicPackages, readJson, repoRoot, run } from './util.mjs';

const HELP = `Usage: pnpm release:pack [--out <dir>] [--target <platform>]...

Builds the workspace's packages, then packs every public one into <dir> (default release/):
@dynamo/core, one @dynamo/core-<platform> per released platform (its binary from
pnpm release:build), and the rest. <dir>/packages.json lists the tarballs in publish order.

  --out <dir>              where the tarballs go (emptied first)
  --target, -t <platform>  only this platform's package (repeatable), and @dynamo/core naming only
                           those: a pack to test on this machine (CI does), never to publish
                           (pnpm release packs all of ${targets.map((t) => t.platform).join(', ')})
  --help, -h               this text`;

/** Packs `dir` with `tool` (npm or pnpm) into `out`; returns the tarball's file name. */
function pack(tool, dir, out) {
  const before = new Set(readdirSync(out));
  run(tool, ['pack', '--pack-destination', out, ...(tool === 'npm' ? ['--loglevel=warn'] : [])], {
    cwd: dir,
    env: npmEnv(),
    what: `${tool} pack in ${relative(repoRoot, dir)}`,
    capture: true,
  });
  const added = readdirSync(out).filter((f) => f.endsWith('.tgz') && !before.has(f));
  if (added.length !== 1) throw new Error(`release: ${tool} pack in ${dir} made ${added.length} tarballs: ${added.join(', ')}`);
  return added[0];
}

/** The platform packages' folders, written by napi create-npm-dirs, each checked to hold its binary. */
function platformPackages(selected, version, binaryName) {
  run('pnpm', ['exec', 'napi', 'create-npm-dirs'], { cwd: coreDir, what: 'napi create-npm-dirs', capture: true });
  const missing = [];
  const dirs = selected.map(({ platform }) => {
    const dir = join(npmDir, platform);
    const binary = join(dir, `${binaryName}.${platform}.node`);
    let format;
    try {
      format = binaryFormat(binary);
    } catch (error) {
      if (error.code !== 'ENOENT') throw error;
      missing.push(platform);
      return dir;
    }
    const want = expectedFormat(platform);
    if (format.format !== want.format || format.arch !== want.arch)
      throw new Error(`release: ${binary} is ${format.format} ${format.arch}, not ${want.format} ${want.arch}`);
    const manifest = readJson(join(dir, 'package.json'));
    if (manifest.version !== version) throw new Error(`release: ${dir}/package.json is ${manifest.version}, @dynamo/core is ${version}`);
    copyFileSync(join(coreDir, 'LICENSE'), join(dir, 'LICENSE'));
    return dir;
  });
  if (missing.length > 0)
    throw new Error(`release: no native binary for ${missing.join(', ')} in ${relative(repoRoot, npmDir)}/: run pnpm release:build first`);
  return dirs;
}

/** A copy of @dynamo/core as published: its files, and a manifest naming the platform packages. */
function stageCore(stage, manifest, selected) {
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  for (const file of manifest.files) copyFileSync(join(coreDir, file), join(stage, file));
  const { scripts, devDependencies, ...published } = manifest;
  published.optionalDependencies = Object.fromEntries(selected.map(({ platform }) => [`${manifest.name}-${platform}`, manifest.version]));
  writeFileSync(join(stage, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
  return stage;
}

await cli(async () => {
  const { values } = parseArgs({
    options: {
      out: { type: 'string', default: 'release' },
      target: { type: 'string', short: 't', multiple: true, default: [] },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return console.log(HELP);
  const unknown = values.target.filter((name) => !targets.some((t) => t.platform === name));
  if (unknown.length > 0) throw new Error(`release: unknown --target ${unknown.join(', ')}; the platforms are ${targets.map((t) => t.platform).join(', ')}`);
  // In napi.targets' order, whatever order they were named in.
  const selected = values.target.length === 0 ? targets : targets.filter((t) => values.target.includes(t.platform));
  const out = resolve(repoRoot, values.out);
  const packages = publicPackages();
  run('pnpm', ['turbo', 'run', 'build', '--output-logs=errors-only', ...packages.map((p) => `--filter=${p.manifest.name}`)], { what: 'building the packages' });

  const core = readJson(join(coreDir, 'package.json'));
  const platformDirs = platformPackages(selected, core.version, core.napi.binaryName);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const packed = [];
  for (const [i, dir] of platformDirs.entries())
    packed.push({ name: `${core.name}-${selected[i].platform}`, version: core.version, platform: selected[i].platform, file: pack('npm', dir, out) });
  packed.push({ name: core.name, version: core.version, file: pack('npm', stageCore(join(out, 'stage', 'core'), core, selected), out) });
  for (const p of packages.filter((p) => p.manifest.name !== core.name))
    packed.push({ name: p.manifest.name, version: p.manifest.version, file: pack('pnpm', p.dir, out) });
  rmSync(join(out, 'stage'), { recursive: true, force: true });

  const list = packed.map((p) => ({ ...p, bytes: statSync(join(out, p.file)).size }));
  writeFileSync(join(out, 'packages.json'), `${JSON.stringify(list, null, 2)}\n`);
  console.log(`release: packed into ${relative(repoRoot, out) || '.'}/ (publish order)`);
  for (const p of list) console.log(`  ${p.file.padEnd(44)} ${(p.bytes / 2 ** 20).toFixed(2).padStart(6)} MiB`);
});

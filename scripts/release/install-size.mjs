// pnpm release:install-size
// What `npm install @dynamo/backend` puts on disk on each released platform: the tarballs in
// release/ installed (production dependencies only) into a scratch project per platform with
// npm's --os/--cpu/--libc, then measured. Prints a table, with the biggest packages.
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cli, npmEnv, readJson, repoRoot, run } from './util.mjs';

const HELP = `Usage: pnpm release:install-size

Installs @dynamo/backend from the tarballs in release/ (pnpm release:pack) once per released
platform, with npm's --os/--cpu/--libc, production dependencies only, and prints the size of
node_modules and its largest packages.`;

/** Bytes under `path`, files only (what the packages occupy, not the file system's blocks). */
function bytes(path) {
  const s = statSync(path);
  if (!s.isDirectory()) return s.size;
  return readdirSync(path).reduce((sum, entry) => sum + bytes(join(path, entry)), 0);
}

/** Top-level packages of node_modules (scoped ones by their full name) with their sizes. */
function packageSizes(nodeModules) {
  const sizes = [];
  for (const entry of readdirSync(nodeModules)) {
    if (entry.startsWith('.')) continue;
    const names = entry.startsWith('@') ? readdirSync(join(nodeModules, entry)).map((n) => `${entry}/${n}`) : [entry];
    for (const name of names) sizes.push({ name, bytes: bytes(join(nodeModules, name)) });
  }
  return sizes.sort((a, b) => b.bytes - a.bytes);
}

const mib = (n) => `${(n / 2 ** 20).toFixed(1)} MiB`;

await cli(async () => {
  const { values } = parseArgs({ options: { help: { type: 'boolean', short: 'h' } } });
  if (values.help) return console.log(HELP);
  const releaseDir = join(repoRoot, 'release');
  const released = readJson(join(releaseDir, 'packages.json'));
  const specs = Object.fromEntries(released.map((p) => [p.name, `file:${join(releaseDir, p.file)}`]));
  const rows = [];
  for (const { platform } of released.filter((p) => p.platform)) {
    const [os, cpu, abi] = platform.split('-');
    const dir = mkdtempSync(join(tmpdir(), `dynamo-size-${platform}-`));
    try {
      const manifest = { name: 'size', private: true, dependencies: { '@dynamo/backend': specs['@dynamo/backend'] }, overrides: specs };
      writeFileSync(join(dir, 'package.json'), JSON.stringify(manifest));
      const flags = [`--os=${os}`, `--cpu=${cpu}`, ...(abi ? [`--libc=${abi === 'gnu' ? 'glibc' : 'musl'}`] : [])];
      run('npm', ['install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--silent', ...flags], {
        cwd: dir,
        env: npmEnv(),
        what: `npm install for ${platform}`,
      });
      const nodeModules = join(dir, 'node_modules');
      const sizes = packageSizes(nodeModules);
      rows.push({ platform, total: bytes(nodeModules), packages: sizes.length, top: sizes.slice(0, 4) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log('| platform | node_modules | top-level packages | largest |\n|---|---:|---:|---|');
  for (const r of rows) console.log(`| ${r.platform} | ${mib(r.total)} | ${r.packages} | ${r.top.map((t) => `${t.name} ${mib(t.bytes)}`).join(', ')} |`);
});

// What the release scripts share: where the repository is, running a command, reading JSON, and
// the public packages.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const coreDir = join(repoRoot, 'packages', 'core');
/** Where `pnpm release:build` puts the platform packages, as `napi create-npm-dirs` lays them out. */
export const npmDir = join(coreDir, 'npm');

export function readJson(path) {
  return JSON.parse(readFileSync(path, 'utf8'));
}

/**
 * The environment for npm run from a pnpm script: without the settings pnpm passes down that npm
 * does not know (it warns about each on every call).
 */
export function npmEnv() {
  const env = { ...process.env };
  for (const key of ['npm_config_verify_deps_before_run', 'npm_config__jsr_registry', 'npm_config_npm_globalconfig']) delete env[key];
  return env;
}

/**
 * Runs a command with inherited output; throws naming `what` when it fails. With `capture`,
 * returns its stdout instead of printing it.
 */
export function run(cmd, args, { cwd = repoRoot, env = process.env, what = cmd, capture = false } = {}) {
  const r = spawnSync(cmd, args, { cwd, env, stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'], encoding: 'utf8' });
  if (r.error) throw new Error(`release: ${what} could not start: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`release: ${what} failed (exit ${r.status ?? r.signal}): ${cmd} ${args.join(' ')}`);
  return capture ? r.stdout : undefined;
}

/** The workspace packages that are published, in dependency order (core first). */
export function publicPackages() {
  const packages = readdirSync(join(repoRoot, 'packages'))
    .map((name) => ({ dir: join(repoRoot, 'packages', name), manifest: readJson(join(repoRoot, 'packages', name, 'package.json')) }))
    .filter((p) => !p.manifest.private);
  const byName = new Map(packages.map((p) => [p.manifest.name, p]));
  const ordered = [];
  const visit = (p) => {
    if (ordered.includes(p)) return;
    for (const dep of Object.keys(p.manifest.dependencies ?? {})) if (byName.has(dep)) visit(byName.get(dep));
    ordered.push(p);
  };
  packages.sort((a, b) => a.manifest.name.localeCompare(b.manifest.name)).forEach(visit);
  return ordered;
}

/** Exits with the error's message (no stack) when `main` throws: these are command-line tools. */
export async function cli(main) {
  try {
    await main();
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}

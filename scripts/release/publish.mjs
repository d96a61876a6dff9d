// pnpm release [--publish] [--registry <url>] [--tag <dist-tag>]
// The changesets-driven release: versions and changelogs come from `pnpm version-packages`
// (changeset version); this packs every public package (pnpm release:pack) and publishes each
// tarball the registry does not have yet, platform packages first. A dry run unless --publish.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { cli, npmEnv, readJson, repoRoot, run } from './util.mjs';

const NPMJS = 'https://registry.npmjs.org/';

const HELP = `Usage: pnpm release [--publish] [--registry <url>] [--tag <dist-tag>]

Releases what changesets versioned. The flow:
  pnpm changeset          record a change (each PR)
  pnpm version-packages   turn the changesets into versions and changelogs; commit that
  pnpm release:build      build the six platform binaries
  pnpm release            pack everything and show what would be published (dry run)
  pnpm release --publish  publish it, then tag the release (changeset tag)

Each tarball whose name@version the registry already has is skipped, so a release that stopped
half-way can be run again. Provenance is attached when publishing to registry.npmjs.org from a CI
that can sign it (GitHub Actions with id-token: write, or GitLab with SIGSTORE_ID_TOKEN).

  --publish          publish for real (default: npm publish --dry-run, nothing leaves the machine)
  --registry <url>   registry to publish to (default: npm's configured registry)
  --tag <dist-tag>   dist-tag (default: latest, or next for a prerelease version)
  --help, -h         this text`;

function pendingChangesets() {
  return readdirSync(join(repoRoot, '.changeset')).filter((f) => f.endsWith('.md') && f !== 'README.md');
}

/** Whether the CI this runs in can sign npm provenance, and if not, why. */
function provenance(registry) {
  if (new URL(registry).host !== new URL(NPMJS).host) return { on: false, why: `${registry} is not registry.npmjs.org, which is where provenance is recorded` };
  if (process.env.GITHUB_ACTIONS === 'true' && process.env.ACTIONS_ID_TOKEN_REQUEST_URL) return { on: true, why: 'GitHub Actions OIDC' };
  if (process.env.GITLAB_CI === 'true' && process.env.SIGSTORE_ID_TOKEN) return { on: true, why: 'GitLab SIGSTORE_ID_TOKEN' };
  return { on: false, why: 'not running in a CI that can sign it (GitHub Actions with id-token: write, or GitLab with SIGSTORE_ID_TOKEN)' };
}

/** True when the registry already has name@version; false on a 404; throws on anything else. */
function published(name, version, registry) {
  const r = spawnSync('npm', ['view', `${name}@${version}`, 'version', '--json', '--registry', registry], { encoding: 'utf8', env: npmEnv() });
  if (r.status === 0) return r.stdout.trim() !== '';
  if (/E404|404 Not Found/.test(`${r.stdout}${r.stderr}`)) return false;
  throw new Error(`release: could not ask ${registry} about ${name}@${version}: ${(r.stderr || r.stdout).trim()}`);
}

await cli(async () => {
  const { values } = parseArgs({
    options: { publish: { type: 'boolean' }, registry: { type: 'string' }, tag: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) return console.log(HELP);
  const dryRun = !values.publish;
  const pending = pendingChangesets();
  if (pending.length > 0) {
    const message = `${pending.length} changesets are not versioned yet (${pending.slice(0, 3).join(', ')}${pending.length > 3 ? ', ...' : ''}): run pnpm version-packages and commit the result first`;
    if (!dryRun) throw new Error(`release: ${message}`);
    console.warn(`release: warning: ${message}; a real release would stop here`);
  }
  const registry = values.registry ?? run('npm', ['config', 'get', 'registry'], { env: npmEnv(), capture: true }).trim();
  const sign = provenance(registry);

  run(process.execPath, [join(repoRoot, 'scripts', 'release', 'pack.mjs')], { what: 'pnpm release:pack' });
  const packages = readJson(join(repoRoot, 'release', 'packages.json'));

  console.log(`\nrelease: ${dryRun ? 'dry run, nothing is published' : 'publishing'} to ${registry}; provenance ${sign.on ? 'on' : 'off'} (${sign.why})`);
  const done = [];
  for (const p of packages) {
    if (published(p.name, p.version, registry)) {
      console.log(`release: ${p.name}@${p.version} is already on the registry, skipped`);
      continue;
    }
    const tag = values.tag ?? (p.version.includes('-') ? 'next' : 'latest');
    const args = ['publish', join(repoRoot, 'release', p.file), '--access', 'public', '--tag', tag, '--registry', registry];
    if (sign.on) args.push('--provenance');
    if (dryRun) args.push('--dry-run');
    run('npm', args, { env: npmEnv(), what: `npm publish of ${p.name}@${p.version}` });
    done.push(`${p.name}@${p.version}`);
  }
  if (!dryRun && done.length > 0) run('pnpm', ['changeset', 'tag'], { what: 'changeset tag' });
  console.log(`\nrelease: ${dryRun ? 'would publish' : 'published'} ${done.length} of ${packages.length} packages${done.length ? `: ${done.join(', ')}` : ''}`);
  if (!dryRun && done.length > 0) console.log('release: push the tags: git push --follow-tags');
});

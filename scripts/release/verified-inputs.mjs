// node scripts/release/verified-inputs.mjs [--check]
// What the six-platform build depends on (the Rust crates, Cargo's manifests, @dynamo/core and
// the release scripts), hashed, and the hash of the inputs `pnpm release:build` last built all six
// platforms from (VERIFIED_FILE, committed). CI cross-builds all six only when the two differ, so
// a change to any of them is checked once, and other changes pay for the build of one platform.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { cli, repoRoot } from './util.mjs';

export const VERIFIED_FILE = join(repoRoot, 'scripts', 'release', 'six-platforms-verified.txt');
const INPUTS = ['crates', 'Cargo.toml', 'Cargo.lock', 'packages/core', 'scripts/release'];
/** Under the inputs, but not in what a release builds or packs: @dynamo/core's own tests. */
const NOT_BUILT = ['packages/core/test', 'packages/core/vitest.config.ts'];

const HELP = `Usage: node scripts/release/verified-inputs.mjs [--check]

Prints the hash of the six-platform build's inputs (${INPUTS.join(', ')}; not
${NOT_BUILT.join(' or ')}), as they are in the working tree, and the hash
${relative(repoRoot, VERIFIED_FILE)} records.

  --check     exit 0 when the two agree (pnpm release:build built all six platforms from these
              inputs), 1 when they differ
  --help, -h  this text`;

/** The hash of every file git tracks or would track under the inputs, by path and content. */
export function inputsHash() {
  const git = (args, input) => execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8', input, maxBuffer: 64 * 2 ** 20 });
  const verified = relative(repoRoot, VERIFIED_FILE);
  const files = git(['ls-files', '--cached', '--others', '--exclude-standard', '--', ...INPUTS, ...NOT_BUILT.map((p) => `:(exclude)${p}`)])
    .split('\n')
    .filter((f) => f !== '' && f !== verified)
    .sort();
  const blobs = git(['hash-object', '--stdin-paths'], `${files.join('\n')}\n`)
    .trim()
    .split('\n');
  const hash = createHash('sha256');
  for (const [i, file] of files.entries()) hash.update(`${blobs[i]} ${file}\n`);
  return hash.digest('hex');
}

/** The hash the last six-platform build recorded, or undefined. */
export function verifiedHash() {
  try {
    return readFileSync(VERIFIED_FILE, 'utf8')
      .split('\n')
      .find((l) => /^[0-9a-f]{64}$/.test(l));
  } catch (error) {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  }
}

/** Records `hash` as built for all six platforms. */
export function recordVerified(hash) {
  writeFileSync(
    VERIFIED_FILE,
    [
      '# The hash of the inputs (crates/, Cargo.toml, Cargo.lock, packages/core/, scripts/release/) that',
      '# pnpm release:build last cross-built all six platforms from; it rewrites this file each time.',
      '# CI builds all six again while the inputs hash differently (scripts/release/verified-inputs.mjs).',
      hash,
      '',
    ].join('\n'),
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await cli(async () => {
    const { values } = parseArgs({ options: { check: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
    if (values.help) return console.log(HELP);
    const current = inputsHash();
    const recorded = verifiedHash();
    console.log(`release inputs ${current}; last built for six platforms: ${recorded ?? 'never'}`);
    if (values.check && current !== recorded) process.exitCode = 1;
  });
}

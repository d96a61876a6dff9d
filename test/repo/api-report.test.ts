// The public names of each package's entry points are reviewed: a name that appears or disappears
// without its report updated fails here, and a report changed since the last release (or since it
// was added) needs a changeset naming the package.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

import { currentReports, ROOT } from '../../scripts/api-report.mjs';

const reports = currentReports();
const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

/** Lines only in `a`, each with `sign` in front. */
const only = (a: string, b: string, sign: string) => {
  const other = new Set(b.split('\n'));
  return a
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#') && !other.has(l))
    .map((l) => `${sign} ${l}`);
};

/** The packages a changeset's front matter names. */
const namedIn = (text: string) => [...(text.split('---')[1] ?? '').matchAll(/['"]?(@dynamo\/[\w-]+)['"]?\s*:/g)].map((m) => m[1]);

describe('API reports', () => {
  it.each(reports.map((r) => [`${r.name}${r.entry === '.' ? '' : r.entry.slice(1)}`, r] as const))('%s matches its report', (_label, r) => {
    const committed = existsSync(r.report) ? readFileSync(r.report, 'utf8') : '';
    const changes = [...only(r.text, committed, '+'), ...only(committed, r.text, '-')];
    expect(
      changes,
      `${relative(ROOT, r.report)} is out of date with the built package:\n${changes.join('\n')}\n` +
        `If the change is meant, run \`node scripts/api-report.mjs --write\` and add a changeset naming ${r.name}.`,
    ).toEqual([]);
  });

  it.each([...new Set(reports.map((r) => r.name))])('a change to the reports of %s since the last release has a changeset', (name) => {
    const pending = readdirSync(join(ROOT, '.changeset')).filter((f) => f.endsWith('.md') && f !== 'README.md');
    for (const r of reports.filter((x) => x.name === name)) {
      const path = relative(ROOT, r.report);
      // The last release consumed the changesets (deleted them); a report added later starts later.
      const added = existsSync(r.report) ? git('log', '-1', '--format=%H', '--diff-filter=A', '--', path) : '';
      const released = git('log', '-1', '--format=%H', '--diff-filter=D', '--', '.changeset/*.md');
      const base = added === '' ? git('rev-parse', 'HEAD') : released !== '' && isAncestor(added, released) ? released : added;
      const before = showAt(base, path);
      const now = existsSync(r.report) ? readFileSync(r.report, 'utf8') : '';
      if (before === now) continue;
      const atBase = new Set(
        git('ls-tree', '--name-only', base, '.changeset/')
          .split('\n')
          .map((f) => f.replace(/^\.changeset\//, '')),
      );
      const declaring = pending.filter((f) => !atBase.has(f) && namedIn(readFileSync(join(ROOT, '.changeset', f), 'utf8')).includes(name));
      expect(
        declaring,
        `${path} changed since ${base.slice(0, 7)} but no changeset added since then names ${name}:\n${[...only(now, before, '+'), ...only(before, now, '-')].join('\n')}`,
      ).not.toEqual([]);
    }
  });
});

function isAncestor(a: string, b: string): boolean {
  try {
    execFileSync('git', ['merge-base', '--is-ancestor', a, b], { cwd: ROOT });
    return true;
  } catch {
    return false;
  }
}

function showAt(commit: string, path: string): string {
  try {
    return execFileSync('git', ['show', `${commit}:${path}`], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return '';
  }
}

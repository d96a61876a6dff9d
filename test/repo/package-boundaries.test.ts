// A file imports another package's code through that package's name (its `exports`), never by a
// relative path into the other package's folder: the shared test harness is @dynamo/testing, and
// each package's internals reach the others through its `./internal` entry point.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

import { ROOT } from '../../scripts/api-report.mjs';

const WORKSPACE_FOLDERS = ['packages', 'examples'];

/** The workspace packages: every folder with a package.json under packages/ and examples/, plus test/ and bench/. */
const packageDirs = [
  ...WORKSPACE_FOLDERS.flatMap((folder) => readdirSync(join(ROOT, folder)).map((name) => join(ROOT, folder, name))),
  join(ROOT, 'test'),
  join(ROOT, 'bench'),
].filter((dir) => existsSync(join(dir, 'package.json')));

/** Source files of a package (TypeScript and JavaScript modules), outside node_modules and dist. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      // A nested project (test/fixtures' outside project) is its own package.
      if (!existsSync(join(path, 'package.json'))) out.push(...sources(path));
    } else if (/\.(ts|mts|mjs|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

describe('package boundaries', () => {
  it.each(packageDirs.map((dir) => [relative(ROOT, dir), dir] as const))('%s imports other packages by name only', (_label, dir) => {
    const crossings: string[] = [];
    for (const file of sources(dir)) {
      const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
      for (const { fileName } of importedFiles) {
        if (!fileName.startsWith('.')) continue;
        const target = resolve(dirname(file), fileName);
        const inRepo = target.startsWith(ROOT + sep);
        // Root scripts (scripts/*.mjs) belong to no package and may be imported by the repo tests.
        const rootScript = target.startsWith(join(ROOT, 'scripts') + sep);
        if (inRepo && !rootScript && !(target + sep).startsWith(dir + sep)) crossings.push(`${relative(ROOT, file)} imports ${fileName}`);
      }
    }
    expect(crossings, 'relative imports that reach into another package (import it by name instead)').toEqual([]);
  });
});

// No two source files of a package import each other, directly or round a longer circle: a circle
// makes load order matter and keeps modules from being read (or moved) one at a time. Nor do two
// folders of a package: each folder is a layer that builds on others one way, so it can be read,
// tested and moved without the ones above it. The files directly in `src/` are the package's root
// layer (its entry points, which wire the folders together, and basics every folder shares) and
// are left out of the folder check.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

import { ROOT } from '../../scripts/api-report.mjs';

/** Every `.ts` file below `dir`. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => join(e.parentPath, e.name));
}

/** The files each file imports by relative path (type-only imports included). */
function importGraph(files: readonly string[]): Map<string, string[]> {
  const known = new Set(files);
  return new Map(
    files.map((file) => {
      const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
      const local = importedFiles.filter((i) => i.fileName.startsWith('.')).map((i) => resolve(dirname(file), i.fileName).replace(/\.js$/, '.ts'));
      return [file, local.filter((f) => known.has(f))];
    }),
  );
}

/** The graph's circles: its strongly connected components of more than one file (Tarjan). */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/**
 * The graph of a package's folders below `src` (their paths, `a/b` for a nested one): a folder
 * imports another when one of its files imports one of the other's. Files directly in `src` are left out.
 */
export function folderGraph(files: ReadonlyMap<string, readonly string[]>, src: string): Map<string, string[]> {
  const folder = (file: string) => relative(src, dirname(file));
  const graph = new Map<string, Set<string>>();
  for (const [file, imports] of files) {
    const from = folder(file);
    if (from === '') continue;
    for (const to of imports.map(folder)) {
      if (to === '' || to === from) continue;
      if (!graph.has(from)) graph.set(from, new Set());
      graph.get(from)!.add(to);
    }
  }
  return new Map([...graph].map(([from, to]) => [from, [...to]]));
}

const packages = readdirSync(join(ROOT, 'packages')).filter((p) => existsSync(join(ROOT, 'packages', p, 'src')));

describe('import circles', () => {
  it('finds a circle when there is one', () => {
    expect(
      circles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c']]);
    expect(
      circles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('finds a folder circle through the files of two folders, and none through the root layer', () => {
    const src = '/p/src';
    const files = new Map([
      ['/p/src/http/server.ts', ['/p/src/openai/route.ts']],
      ['/p/src/openai/route.ts', ['/p/src/http/sse.ts', '/p/src/start.ts']],
      ['/p/src/http/sse.ts', []],
      ['/p/src/start.ts', ['/p/src/http/server.ts']],
    ]);
    expect(circles(folderGraph(files, src))).toEqual([['http', 'openai']]);
    files.set('/p/src/http/server.ts', []);
    expect(circles(folderGraph(files, src))).toEqual([]);
  });

  it.each(packages)('packages/%s/src has no folder circle', (pkg) => {
    const src = join(ROOT, 'packages', pkg, 'src');
    expect(circles(folderGraph(importGraph(sources(src)), src)), 'folders whose files import each other (directly or round a circle)').toEqual([]);
  });

  it.each(packages)('packages/%s/src has none', (pkg) => {
    const found = circles(importGraph(sources(join(ROOT, 'packages', pkg, 'src'))));
    expect(
      found.map((c) => c.map((f) => relative(ROOT, f)).join(' <-> ')),
      'files that import each other (directly or round a circle)',
    ).toEqual([]);
  });
});

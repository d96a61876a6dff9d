import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Type-checks every ```ts block of a package's README.md against the package itself (the blocks
 * are compiled inside the package folder, so its own name resolves to its exports and types).
 * `named` writes block `index` as `file` instead, so other blocks can import it (`./graph.js`).
 * Returns how many blocks were checked; throws with tsc's output when one does not compile.
 */
export function typecheckReadme(packageRoot: string, named: Readonly<Record<string, number>> = {}): number {
  const blocks = [...readFileSync(join(packageRoot, 'README.md'), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const names = new Map(Object.entries(named).map(([file, index]) => [index, file]));
  const dir = mkdtempSync(join(packageRoot, '.readme-check-'));
  try {
    for (const [i, code] of blocks.entries()) writeFileSync(join(dir, names.get(i) ?? `example-${i}.ts`), code);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({ extends: '../../../tsconfig.base.json', compilerOptions: { noEmit: true, rootDir: '.', module: 'NodeNext' }, include: ['*.ts'] }),
    );
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { stdio: 'pipe' });
  } catch (err) {
    throw new Error(String((err as { stdout?: Buffer }).stdout ?? err));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return blocks.length;
}

/** The README test of the package whose test file is `testFileUrl` (its `import.meta.url`). */
export function readmeSuite(testFileUrl: string, minBlocks: number, named?: Readonly<Record<string, number>>): void {
  describe('README', () => {
    it('its TypeScript examples type-check against the package', () => {
      expect(typecheckReadme(join(dirname(fileURLToPath(testFileUrl)), '..'), named)).toBeGreaterThanOrEqual(minBlocks);
      // A whole tsc run: about 2 s alone, past vitest's 5 s default when the machine is busy.
    }, 60_000);
  });
}

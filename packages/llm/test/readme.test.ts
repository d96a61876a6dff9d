import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

describe('README', () => {
  it('its TypeScript examples type-check against the package', () => {
    const blocks = [...readFileSync(join(root, 'README.md'), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    // Inside the package so '@dynamo/llm' resolves to this package's exports and types.
    const dir = mkdtempSync(join(root, '.readme-check-'));
    try {
      blocks.forEach((code, i) => writeFileSync(join(dir, `example-${i}.ts`), code));
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
  });
});

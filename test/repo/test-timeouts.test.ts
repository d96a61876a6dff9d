// Every test runs under a time bound that fits a busy 2-core machine. vitest's defaults (5 s a test,
// 10 s a hook) fail a test that starts a process whenever another job shares the machine, and CI
// must pass beside one: so every package's vitest config starts from @dynamo/testing's
// testConfig() (60 s a test, 120 s a hook), and no config, test or hook names a bound under the floor.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

import { MIN_TIMEOUT_MS } from '@dynamo/testing/vitest-config';

import { ROOT } from '../../scripts/api-report.mjs';

/** The repository's own files whose name passes `test`, outside dependencies, builds, dot folders and outside-project fixtures. */
function repoFiles(test: (name: string) => boolean, dir = ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory())
      return ['node_modules', 'dist', 'fixtures', 'target'].includes(e.name) || e.name.startsWith('.') ? [] : repoFiles(test, join(dir, e.name));
    return e.isFile() && test(e.name) ? [join(dir, e.name)] : [];
  });
}

const parse = (file: string) => ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);

/** The value of a numeric literal (or a product or sum of them), else undefined. */
function numberOf(node: ts.Expression): number | undefined {
  if (ts.isNumericLiteral(node)) return Number(node.text.replaceAll('_', ''));
  if (ts.isParenthesizedExpression(node)) return numberOf(node.expression);
  if (ts.isBinaryExpression(node)) {
    const [a, b] = [numberOf(node.left), numberOf(node.right)];
    if (a === undefined || b === undefined) return undefined;
    if (node.operatorToken.kind === ts.SyntaxKind.AsteriskToken) return a * b;
    if (node.operatorToken.kind === ts.SyntaxKind.PlusToken) return a + b;
  }
  return undefined;
}

/** vitest's functions that take a time bound. */
const RUNNERS = new Set(['it', 'test', 'describe', 'suite', 'beforeAll', 'afterAll', 'beforeEach', 'afterEach']);

/** Where `source` names a time bound under the floor: `file:line what`. */
function boundsUnderFloor(source: ts.SourceFile): string[] {
  const found: string[] = [];
  const at = (node: ts.Node) => `${relative(ROOT, source.fileName)}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  const checkObject = (object: ts.ObjectLiteralExpression, keys: readonly string[]) => {
    for (const p of object.properties) {
      if (!ts.isPropertyAssignment(p) || !keys.includes(p.name.getText())) continue;
      const value = numberOf(p.initializer);
      if (value !== undefined && value < MIN_TIMEOUT_MS) found.push(`${at(p)} ${p.name.getText()}: ${p.initializer.getText()}`);
    }
  };
  /** The name a call chain starts from: `it` for it(...), it.each(...)(...), it.skipIf(x)(...). */
  const root = (callee: ts.Expression): string | undefined => {
    let e = callee;
    while (ts.isPropertyAccessExpression(e) || ts.isCallExpression(e)) e = e.expression;
    return ts.isIdentifier(e) ? e.text : undefined;
  };
  const visit = (node: ts.Node) => {
    // A config's (or vi.setConfig's) bounds, wherever they are.
    if (ts.isObjectLiteralExpression(node)) checkObject(node, ['testTimeout', 'hookTimeout']);
    if (ts.isCallExpression(node) && RUNNERS.has(root(node.expression) ?? '')) {
      // A runner's bound is a number after its function, or an options object's `timeout`.
      const fn = node.arguments.findIndex((a) => ts.isArrowFunction(a) || ts.isFunctionExpression(a));
      for (const [i, arg] of node.arguments.entries()) {
        if (ts.isObjectLiteralExpression(arg)) checkObject(arg, ['timeout']);
        const value = i > fn && fn >= 0 ? numberOf(arg) : undefined;
        if (value !== undefined && value < MIN_TIMEOUT_MS) found.push(`${at(arg)} ${root(node.expression)}(…, ${arg.getText()})`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const configs = repoFiles((name) => name === 'vitest.config.ts');
const testFiles = repoFiles((name) => name.endsWith('.test.ts'));

describe('time bounds of tests', () => {
  it("finds the workspace's vitest configs and test files", () => {
    expect(configs.length).toBeGreaterThanOrEqual(15);
    expect(testFiles.length).toBeGreaterThanOrEqual(100);
  });

  it.each(configs.map((file) => [relative(ROOT, file), file] as const))('%s starts from testConfig() of @dynamo/testing/vitest-config', (_label, file) => {
    const source = parse(file);
    const imports = source.statements.filter(ts.isImportDeclaration).map((i) => (i.moduleSpecifier as ts.StringLiteral).text);
    expect(imports, 'imports').toContain('@dynamo/testing/vitest-config');
    const exported = source.statements.find(ts.isExportAssignment);
    expect(exported && ts.isCallExpression(exported.expression) && exported.expression.expression.getText(), 'the default export').toBe('testConfig');
    expect(boundsUnderFloor(source), `bounds under ${MIN_TIMEOUT_MS} ms`).toEqual([]);
  });

  it(`no test, hook or suite names a bound under ${MIN_TIMEOUT_MS / 1000} s`, () => {
    const found = testFiles.flatMap((file) => boundsUnderFloor(parse(file)));
    expect(found, `bounds under ${MIN_TIMEOUT_MS} ms (leave the bound out for the config's, or name one that fits a busy machine)`).toEqual([]);
  });
});

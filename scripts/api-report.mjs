// The public names of every @dynamo/* package, one report file per entry point of its `exports`
// map (`packages/<pkg>/api/<entry>.api.txt`: "." is `index`), read from the built `.d.ts` with the
// TypeScript checker so type-only exports count too. `node scripts/api-report.mjs --write`
// rewrites the reports after a deliberate change (add a changeset naming the package);
// test/repo/api-report.test.ts fails when a report and the built packages differ.
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The published packages: `{ name, dir, entries: [{ entry, types, report }] }`. */
export function publicPackages(root = ROOT) {
  const packages = [];
  for (const name of readdirSync(join(root, 'packages')).sort()) {
    const dir = join(root, 'packages', name);
    const manifestPath = join(dir, 'package.json');
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
    if (manifest.private) continue;
    const entries = [];
    for (const [entry, target] of Object.entries(manifest.exports ?? {})) {
      if (typeof target !== 'object' || !target.types) continue;
      const file = entry === '.' ? 'index' : entry.slice(2).replaceAll('/', '-');
      entries.push({ entry, types: join(dir, target.types), report: join(dir, 'api', `${file}.api.txt`) });
    }
    packages.push({ name: manifest.name, dir, entries });
  }
  return packages;
}

const KINDS = [
  [ts.SymbolFlags.Class, 'class'],
  [ts.SymbolFlags.Function, 'function'],
  [ts.SymbolFlags.Enum, 'enum'],
  [ts.SymbolFlags.Variable, 'const'],
  [ts.SymbolFlags.Interface, 'interface'],
  [ts.SymbolFlags.TypeAlias, 'type'],
  [ts.SymbolFlags.Module, 'namespace'],
];

/** `kind name` lines, sorted by name, of what `typesFile` exports. */
function exportLines(program, typesFile) {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(typesFile);
  if (!source) throw new Error(`api-report: ${typesFile} is missing; build the package first`);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  if (!moduleSymbol) return [];
  return checker
    .getExportsOfModule(moduleSymbol)
    .map((symbol) => {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      const kinds = KINDS.filter(([flag]) => target.flags & flag).map(([, kind]) => kind);
      return `${kinds.join('+') || 'unknown'} ${symbol.getName()}`;
    })
    .sort((a, b) => a.split(' ')[1].localeCompare(b.split(' ')[1]));
}

/** Each entry point's report text as the built packages have it: `[{ name, entry, report, text, count }]`. */
export function currentReports(root = ROOT) {
  const packages = publicPackages(root);
  const files = packages.flatMap((p) => p.entries.map((e) => e.types));
  const program = ts.createProgram(files, {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
  });
  return packages.flatMap((p) =>
    p.entries.map((e) => {
      const lines = exportLines(program, e.types);
      const header = `# ${p.name}${e.entry === '.' ? '' : e.entry.slice(1)}: ${lines.length} exported names (node scripts/api-report.mjs --write)`;
      return { name: p.name, entry: e.entry, report: e.report, text: `${[header, ...lines].join('\n')}\n`, count: lines.length };
    }),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const write = process.argv.includes('--write');
  for (const r of currentReports()) {
    const was = existsSync(r.report) ? readFileSync(r.report, 'utf8') : undefined;
    const state = was === r.text ? 'unchanged' : was === undefined ? 'new' : 'changed';
    console.log(`${r.name}${r.entry === '.' ? '' : r.entry.slice(1)}: ${r.count} names (${state})`);
    if (write && state !== 'unchanged') {
      mkdirSync(dirname(r.report), { recursive: true });
      writeFileSync(r.report, r.text);
    }
  }
}

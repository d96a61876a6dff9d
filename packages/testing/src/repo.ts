import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository's root folder. This package is private to the repository: it finds the programs
 * its helpers start (CLIs, fixture workers, the stock venv script) by their place in the tree,
 * not through package dependencies, so the packages it tests can depend on it without a cycle.
 */
export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** This package's own folder. */
export const testingRoot = join(repoRoot, 'packages', 'testing');

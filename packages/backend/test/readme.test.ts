import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { typecheckReadme } from '../../runtime/test/harness/readme.js';

describe('README', () => {
  it('its TypeScript examples type-check against the package', () => {
    expect(typecheckReadme(join(dirname(fileURLToPath(import.meta.url)), '..'))).toBeGreaterThanOrEqual(2);
  });
});

/**
 * `@dynamo/sdk/vitest`: what a vitest suite of `@service` classes needs on Node 20.
 *
 * ```ts
 * // vitest.config.ts
 * import { lowerStandardDecorators } from '@dynamo/sdk/vitest';
 * import { defineConfig } from 'vitest/config';
 *
 * export default defineConfig({ plugins: [lowerStandardDecorators()] });
 * ```
 *
 * @packageDocumentation
 */
import { transform } from 'esbuild';

/** The Vite plugin {@link lowerStandardDecorators} returns (structurally a Vite `Plugin`). */
export interface DecoratorLoweringPlugin {
  readonly name: string;
  readonly enforce: 'pre';
  transform(code: string, id: string): Promise<{ code: string; map: string } | null>;
}

/**
 * A Vite plugin that compiles TypeScript standard decorators (`@service`, `@endpoint`) down to
 * plain JavaScript before Vite's own transform. Node 20 has no native decorators and Vite 8 keeps
 * standard decorators as they are; tsx and tsc lower them the same way.
 */
export function lowerStandardDecorators(): DecoratorLoweringPlugin {
  return {
    name: 'lower-standard-decorators',
    enforce: 'pre',
    async transform(code, id) {
      if (!/\.[cm]?ts$/.test(id) || !code.includes('@')) return null;
      const out = await transform(code, { loader: 'ts', target: 'es2022', format: 'esm', sourcemap: true, sourcefile: id });
      return { code: out.code, map: out.map };
    },
  };
}

// Two copies of @dynamo/runtime in one process (a dependency pinning another version, a bundled
// copy): an error one copy makes is recognized by the other, by kind.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import * as ours from '../src/errors.js';

const built = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'errors.js');
const dir = mkdtempSync(join(tmpdir(), 'dynamo-runtime-copy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
// The built module, loaded again from another path: Node gives it module state and classes of its own.
copyFileSync(built, join(dir, 'errors.js'));
const other = (await import(pathToFileURL(join(dir, 'errors.js')).href)) as typeof ours;

describe('Dynamo errors across two copies of the package', () => {
  it("are different classes, yet each copy recognizes the other's errors by kind", () => {
    expect(other.InvalidArgument).not.toBe(ours.InvalidArgument);
    const theirs = new other.InvalidArgument('bad temperature');
    expect(ours.isDynamoError(theirs)).toBe(true);
    expect(ours.kindOf(theirs)).toBe('InvalidArgument');
    expect(theirs).toBeInstanceOf(ours.DynamoException);
    expect(theirs).toBeInstanceOf(ours.InvalidArgument);
    expect(theirs).not.toBeInstanceOf(ours.CannotConnect);
    const mine = new ours.WorkerOverloaded('queue full');
    expect(other.isDynamoError(mine)).toBe(true);
    expect(mine).toBeInstanceOf(other.WorkerOverloaded);
    expect(mine).not.toBeInstanceOf(other.InvalidArgument);
  });

  it("pass through the other copy's classification unchanged", () => {
    const theirs = new other.StreamIncomplete('engine lost its KV cache');
    expect(ours.toDynamoException(theirs)).toBe(theirs);
    expect(ours.kindOf(ours.toDynamoException(new Error('plain')))).toBe('Unknown');
  });

  it('leave plain errors, look-alikes and classes of your own to the plain check', () => {
    expect(ours.isDynamoError(new Error('x'))).toBe(false);
    expect(ours.isDynamoError({ kind: 'InvalidArgument', message: 'x' })).toBe(false);
    expect(ours.kindOf(undefined)).toBeUndefined();
    class PromptTooLong extends ours.InvalidArgument {}
    expect(new ours.InvalidArgument('x')).not.toBeInstanceOf(PromptTooLong);
    expect(new PromptTooLong('x')).toBeInstanceOf(PromptTooLong);
    expect(new PromptTooLong('x')).toBeInstanceOf(other.InvalidArgument);
  });
});

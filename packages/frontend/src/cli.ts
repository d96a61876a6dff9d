#!/bin/sh
//bin/true; export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"; exec node --max-semi-space-size=4 "$0" "$@"
// Run as a program, sh reads the line above: at most two malloc arenas, a young generation of at most
// 2 x 4 MiB (see the README's "Memory"). To JavaScript it is a comment, and `node cli.js` skips it.
import { DynamoException, parseFlags, toDynamoException } from '@dynamo/runtime';

import { frontendFlags, frontendHelp } from './settings.js';
import { startFrontend } from './start.js';

// dynamo-frontend: serve until SIGTERM/SIGINT, then shut down gracefully and exit 0. A second
// signal exits at once (130). Bad flags exit 2, a failed start 1, with the reason on stderr.
async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(frontendFlags, argv, process.env);
  } catch (err) {
    process.stderr.write(`dynamo-frontend: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(frontendHelp());
    return 0;
  }
  let frontend;
  try {
    frontend = await startFrontend({ ...parsed.values, runtimeOptions: { env: process.env } });
  } catch (err) {
    const error = toDynamoException(err);
    process.stderr.write(`dynamo-frontend: ${error.message}\n`);
    return err instanceof DynamoException && err.kind === 'InvalidArgument' ? 2 : 1;
  }
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  const again = () => process.exit(130);
  process.once('SIGTERM', again);
  process.once('SIGINT', again);
  frontend.runtime.log('frontend').info({ signal }, 'shutting down');
  await frontend.close();
  return 0;
}

process.exitCode = await main(process.argv.slice(2));

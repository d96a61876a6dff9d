import type * as Zmq from 'zeromq';

// zeromq is a native addon of a few MB: a process that never opens a ZMQ socket never loads it.
let lib: typeof Zmq | undefined;

/** The zeromq library, loaded on first use. */
export async function loadZmq(): Promise<typeof Zmq> {
  lib ??= await import('zeromq');
  return lib;
}

import { mkdir, open, readFile, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const HEARTBEAT_MS = 5_000;
/** A lock from another host whose holder stopped touching it for this long is abandoned. */
const STALE_MS = 30_000;
const POLL_MS = 200;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function isStale(path: string): Promise<boolean> {
  const [text, info] = await Promise.all([readFile(path, 'utf8').catch(() => ''), stat(path).catch(() => undefined)]);
  if (info === undefined) return false; // released meanwhile: just try again
  const [host, pidText] = text.split('\n');
  const pid = Number(pidText);
  if (host === hostname() && Number.isInteger(pid) && pid > 0) return !alive(pid);
  return Date.now() - info.mtimeMs > STALE_MS;
}

/**
 * Runs `fn` holding an exclusive lock file (created with `O_EXCL`, holding `host\npid`, touched
 * every few seconds). A lock whose process is gone (same host) or that went untouched for 30 s
 * (another host sharing the cache) is taken over. Waiters poll; `onWait` is called once if they
 * have to. Best effort across processes; within a process callers also dedupe in memory.
 */
export async function withFileLock<T>(path: string, fn: () => Promise<T>, options: { signal?: AbortSignal; onWait?: () => void } = {}): Promise<T> {
  await mkdir(dirname(path), { recursive: true });
  let waited = false;
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      const handle = await open(path, 'wx');
      await handle.writeFile(`${hostname()}\n${process.pid}\n`);
      await handle.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await isStale(path)) {
      await unlink(path).catch(() => undefined);
      continue;
    }
    if (!waited) options.onWait?.();
    waited = true;
    await sleep(POLL_MS, undefined, { signal: options.signal });
  }
  const heartbeat = setInterval(() => {
    const now = new Date();
    utimes(path, now, now).catch(() => undefined);
  }, HEARTBEAT_MS);
  heartbeat.unref();
  try {
    return await fn();
  } finally {
    clearInterval(heartbeat);
    await unlink(path).catch(() => undefined);
  }
}

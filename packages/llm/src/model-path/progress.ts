import cliProgress from 'cli-progress';
import type { Log } from '@dynamo/runtime';

/** Progress of one file's download. */
export interface FileProgress {
  /** A transfer begins at `offset` (> 0 when resuming) of `total` bytes (undefined if unknown). */
  start(offset: number, total: number | undefined): void;
  advance(bytes: number): void;
  done(): void;
}

/** Reports downloads of one model; `stop()` once at the end, success or not. */
export interface Progress {
  file(name: string): FileProgress;
  stop(): void;
}

/** How downloads are reported; see `ResolveOptions.progress`. */
export type ProgressMode = 'auto' | 'bar' | 'log' | 'none';

/** Formats a byte count the way `huggingface_hub`'s bars do: `11.4MB`. */
export function formatBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return unit === 0 ? `${n}B` : `${value.toFixed(1)}${units[unit]}`;
}

const none: Progress = { file: () => ({ start() {}, advance() {}, done() {} }), stop() {} };

function logProgress(repoId: string, log: Log): Progress {
  return {
    file(name) {
      let began = 0;
      let size: number | undefined;
      return {
        start(offset, total) {
          began = Date.now();
          size = total;
          const fields = { repo: repoId, file: name, size: total };
          if (offset > 0) log.info({ ...fields, offset }, `resuming ${repoId}/${name} at ${formatBytes(offset)}`);
          else log.info(fields, `downloading ${repoId}/${name}${total === undefined ? '' : ` (${formatBytes(total)})`}`);
        },
        advance() {},
        done() {
          const ms = began === 0 ? 0 : Date.now() - began;
          log.info({ repo: repoId, file: name, size, ms }, `downloaded ${repoId}/${name}`);
        },
      };
    },
    stop() {},
  };
}

function barProgress(stream: NodeJS.WritableStream): Progress {
  let bars: cliProgress.MultiBar | undefined;
  const payload = (file: string, value: number, total: number | undefined) => ({
    file: file.length > 28 ? `…${file.slice(-27)}` : file.padEnd(28),
    done: formatBytes(value),
    size: total === undefined ? '?' : formatBytes(total),
  });
  return {
    file(name) {
      let bar: cliProgress.SingleBar | undefined;
      let value = 0;
      let size: number | undefined;
      return {
        start(offset, total) {
          bars ??= new cliProgress.MultiBar({
            stream,
            format: '{file} |{bar}| {percentage}% {done}/{size} eta {eta_formatted}',
            hideCursor: true,
            autopadding: true,
            barsize: 30,
          });
          value = offset;
          size = total;
          if (bar) bar.setTotal(total ?? 0);
          else bar = bars.create(total ?? 0, offset, payload(name, offset, total));
          bar.update(offset, payload(name, offset, total));
        },
        advance(bytes) {
          value += bytes;
          bar?.update(value, payload(name, value, size));
        },
        done() {
          bar?.update(size ?? value, payload(name, size ?? value, size ?? value));
        },
      };
    },
    stop() {
      bars?.stop();
    },
  };
}

/**
 * Picks the reporter: `bar` draws one progress bar per file on stderr (cli-progress), `log` writes
 * an info line when each file starts and ends, `none` is silent; `auto` is `bar` on a TTY stderr
 * unless `HF_HUB_DISABLE_PROGRESS_BARS` is set, else `log`.
 */
export function createProgress(
  mode: ProgressMode,
  repoId: string,
  log: Log,
  opts: { disableBars: boolean; stream?: NodeJS.WritableStream & { isTTY?: boolean } },
): Progress {
  const stream = opts.stream ?? process.stderr;
  const effective = mode === 'auto' ? (stream.isTTY && !opts.disableBars ? 'bar' : 'log') : mode;
  if (effective === 'none') return none;
  if (effective === 'log') return logProgress(repoId, log);
  return barProgress(stream);
}

import { Writable } from 'node:stream';
import { createLogUpdate } from 'log-update';

import type { WorkerStatus } from './supervisor.js';

/** The status as a table: one row per service with its ready instances, restarts and pids. */
export function renderStatus(status: readonly WorkerStatus[]): string {
  const services = [...new Set(status.map((w) => w.service))];
  const rows = services.map((service) => {
    const workers = status.filter((w) => w.service === service);
    const ready = workers.filter((w) => w.state === 'ready').length;
    const waiting = workers.filter((w) => w.state !== 'ready').map((w) => `#${w.index} ${w.state}`);
    const url = workers.find((w) => w.httpUrl)?.httpUrl ?? '';
    return [
      service,
      `${ready}/${workers.length}`,
      String(workers.reduce((n, w) => n + w.restarts, 0)),
      workers.map((w) => w.pid ?? '-').join(','),
      [url, ...waiting].filter(Boolean).join(' '),
    ];
  });
  const table = [['SERVICE', 'INSTANCES', 'RESTARTS', 'PIDS', ''], ...rows];
  const widths = table[0]!.map((_, c) => Math.max(...table.map((r) => r[c]!.length)));
  return table
    .map((r) =>
      r
        .map((cell, c) => cell.padEnd(widths[c]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/**
 * A status table kept at the bottom of a terminal while log lines scroll above it: every line
 * written through {@link LiveStatus.stream} or {@link LiveStatus.line} clears the table, prints,
 * and draws the table again.
 */
export class LiveStatus {
  private readonly update;
  private text = '';

  constructor(private readonly terminal: NodeJS.WriteStream) {
    this.update = createLogUpdate(terminal);
  }

  /** A writable for a logger: looks like a TTY so the logger formats for people. */
  readonly stream: Writable & { isTTY: boolean } = Object.assign(
    new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        this.print(chunk.toString());
        done();
      },
    }),
    { isTTY: true },
  );

  /** Prints one line above the table. */
  line(text: string): void {
    this.print(`${text}\n`);
  }

  /** Redraws the table. */
  show(table: string): void {
    this.text = table;
    this.update(table);
  }

  /** Leaves the last table on screen and stops redrawing. */
  done(): void {
    this.update.done();
  }

  private print(text: string): void {
    this.update.clear();
    this.terminal.write(text);
    this.update(this.text);
  }
}

import { cpuMs, rssMiB } from '@dynamo/testing/proc-stats';

/** One reading of the processes under test. */
interface Sample {
  /** Wall clock, ns since the epoch (aiperf's clock for its profiling window). */
  ns: number;
  cpu: number[];
  rss: number[];
}

/** What each process spent over a window. */
export interface Usage {
  cpuMs: number[];
  peakRssMiB: number[];
}

/**
 * Reads CPU and RSS of some processes every 250 ms while a load runs, so their use can be cut to
 * exactly the load generator's profiling window afterwards (its warm-up and start-up excluded).
 */
export class ProcessSampler {
  readonly #pids: number[];
  readonly #samples: Sample[] = [];
  readonly #timer: NodeJS.Timeout;
  #ended = false;

  constructor(pids: number[]) {
    this.#pids = pids;
    this.#read();
    this.#timer = setInterval(() => this.#read(), 250);
  }

  /** Stops sampling (once; later calls do nothing). */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    clearInterval(this.#timer);
    this.#read();
  }

  /** Each process's CPU and peak RSS between `fromNs` and `toNs` (after {@link end}). */
  usage(fromNs: number, toNs: number): Usage {
    const inside = this.#samples.filter((s) => s.ns >= fromNs && s.ns <= toNs);
    const at = (ns: number) => this.#interpolate(ns);
    const first = at(fromNs);
    const last = at(toNs);
    return {
      cpuMs: this.#pids.map((_, i) => last[i]! - first[i]!),
      peakRssMiB: this.#pids.map((_, i) => Math.max(...[...inside, this.#samples.at(-1)!].map((s) => s.rss[i]!))),
    };
  }

  /** CPU so far of each process at `ns`, linear between the two samples around it. */
  #interpolate(ns: number): number[] {
    const after = this.#samples.findIndex((s) => s.ns >= ns);
    if (after <= 0) return (after === 0 ? this.#samples[0]! : this.#samples.at(-1)!).cpu;
    const a = this.#samples[after - 1]!;
    const b = this.#samples[after]!;
    const f = (ns - a.ns) / (b.ns - a.ns);
    return a.cpu.map((c, i) => c + (b.cpu[i]! - c) * f);
  }

  #read(): void {
    this.#samples.push({ ns: Date.now() * 1e6, cpu: this.#pids.map(cpuMs), rss: this.#pids.map(rssMiB) });
  }
}

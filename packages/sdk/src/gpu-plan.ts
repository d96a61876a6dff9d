import { execFileSync } from 'node:child_process';

/** The GPUs a machine offers: `CUDA_VISIBLE_DEVICES` when set, else what `nvidia-smi -L` lists. */
export function visibleGpus(env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  const set = env.CUDA_VISIBLE_DEVICES;
  if (set !== undefined)
    return set
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  try {
    const out = execFileSync('nvidia-smi', ['-L'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
    return out
      .split('\n')
      .filter((l) => /^GPU \d+/.test(l))
      .map((_, i) => String(i));
  } catch {
    return [];
  }
}

/** A service's GPU need per worker, as `resources.gpu` gives it. */
export interface GpuNeed {
  service: string;
  workers: number;
  /** GPUs per worker: a whole number, or a fraction below 1 to share a device. */
  gpu: number;
}

/** What {@link planGpus} decided: `CUDA_VISIBLE_DEVICES` per service worker, and anything to warn about. */
export interface GpuPlan {
  /** `service` → one device list per worker (absent: the service uses no GPU). */
  devices: Map<string, string[]>;
  warnings: string[];
}

/**
 * Hands out `gpus` to workers in order: a worker needing n GPUs gets the next n devices; workers
 * needing a fraction share a device (1/fraction per device). When the machine has too few, the
 * plan wraps around to the first device and says it oversubscribed.
 */
export function planGpus(needs: readonly GpuNeed[], gpus: readonly string[]): GpuPlan {
  const devices = new Map<string, string[]>();
  const warnings: string[] = [];
  const pool = gpus.length > 0 ? gpus : undefined;
  let next = 0;
  let overflow = false;
  const take = (n: number): string[] => {
    const out: string[] = [];
    for (let i = 0; i < n; i++, next++) {
      if (pool && next >= pool.length) overflow = true;
      out.push(pool ? pool[next % pool.length]! : String(next));
    }
    return out;
  };
  for (const need of needs) {
    if (!(need.gpu > 0)) continue;
    const lists: string[] = [];
    if (need.gpu < 1) {
      const perDevice = Math.floor(1 / need.gpu);
      for (let w = 0; w < need.workers; w += perDevice) {
        const [device] = take(1);
        for (let k = 0; k < perDevice && w + k < need.workers; k++) lists.push(device!);
      }
    } else {
      if (!Number.isInteger(need.gpu))
        warnings.push(`${need.service}: resources.gpu ${need.gpu} is rounded up to ${Math.ceil(need.gpu)} whole GPUs per worker`);
      for (let w = 0; w < need.workers; w++) lists.push(take(Math.ceil(need.gpu)).join(','));
    }
    devices.set(need.service, lists);
  }
  if (!pool && devices.size > 0) warnings.push(`no GPU found (nvidia-smi, CUDA_VISIBLE_DEVICES): assigning device indices 0..${next - 1} anyway`);
  if (overflow) warnings.push(`the graph asks for ${next} GPUs and this machine has ${pool!.length}: devices are shared (oversubscribed)`);
  return { devices, warnings };
}

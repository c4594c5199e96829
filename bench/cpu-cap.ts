// A CPU quota for one process: a cgroup of its own with `share` of one core (the CFS bandwidth
// controller), for bench/throughput.ts's BENCH_PROCESS_CPU. On a machine with fewer cores than the
// processes under test, PostgreSQL and the load generator need, capping each server process at a
// fraction of a core gives every process the same CPU whether it runs alone or beside another, so
// "2 processes vs 1" measures how the server scales with processes rather than how many cores are
// left over. cgroup v2 (`cpu.max`, where the root's cgroup.controllers lists cpu) or v1 (the `cpu`
// hierarchy's cpu.cfs_quota_us); needs write access to the hierarchy (root, or a delegated cgroup).
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// a short period: a process over its quota waits at most the rest of 10 ms, not of 100 ms (its p99)
const PERIOD_US = 10_000;

interface Hierarchy {
  root: string;
  version: 1 | 2;
}

/** The writable cgroup hierarchy with the cpu controller, or a reason there is none. */
function hierarchy(): Hierarchy | string {
  const v2 = '/sys/fs/cgroup';
  const controllers = join(v2, 'cgroup.controllers');
  if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('cpu')) {
    // the root's children get cpu.max only where the root hands the controller down
    const subtree = join(v2, 'cgroup.subtree_control');
    if (!readFileSync(subtree, 'utf8').split(/\s+/).includes('cpu')) {
      try {
        writeFileSync(subtree, '+cpu');
      } catch (err) {
        return `cannot enable the cpu controller for ${v2}'s children (${(err as Error).message}); run as root`;
      }
    }
    return { root: v2, version: 2 };
  }
  const v1 = '/sys/fs/cgroup/cpu';
  if (existsSync(join(v1, 'cpu.cfs_quota_us'))) return { root: v1, version: 1 };
  return 'no cgroup hierarchy with the cpu controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us) under /sys/fs/cgroup';
}

/** A quota of `share` of one core (0 < share <= number of cores) that processes can be put under. */
export class CpuCap {
  readonly #h: Hierarchy;
  readonly #quotaUs: number;
  readonly #made: string[] = [];
  #next = 0;

  /** Throws with the reason when this machine cannot cap (no cpu controller, or no write access). */
  constructor(readonly share: number) {
    if (!(share > 0)) throw new Error('BENCH_PROCESS_CPU must be a positive fraction of a core, e.g. 0.3');
    const h = hierarchy();
    if (typeof h === 'string') throw new Error(`BENCH_PROCESS_CPU: ${h}`);
    this.#h = h;
    this.#quotaUs = Math.max(1000, Math.round(share * PERIOD_US));
    // the first group is made here, so that a hierarchy we may not write to fails before the run
    this.#make();
  }

  #make(): string {
    const dir = join(this.#h.root, `svc-bench-${process.pid}-${this.#next++}`);
    try {
      mkdirSync(dir);
      if (this.#h.version === 2) writeFileSync(join(dir, 'cpu.max'), `${this.#quotaUs} ${PERIOD_US}`);
      else {
        writeFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
        writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(this.#quotaUs));
      }
    } catch (err) {
      throw new Error(`BENCH_PROCESS_CPU: cannot make a cgroup under ${this.#h.root} (${(err as Error).message}); run as root`);
    }
    this.#made.push(dir);
    return dir;
  }

  /** Puts process `pid` (and the threads it starts from now on) under a quota of its own. */
  place(pid: number): void {
    // the last group again when its process has exited (a process that exits leaves its group)
    const last = this.#made.at(-1);
    const dir = last !== undefined && readFileSync(join(last, 'cgroup.procs'), 'utf8').trim() === '' ? last : this.#make();
    writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  }

  /** Removes the groups it made (each must be empty: call after the processes have exited). */
  remove(): void {
    for (const dir of this.#made.splice(0)) {
      try {
        rmdirSync(dir);
      } catch {
        // still has a process (one that did not exit): the kernel keeps it; nothing else to do
      }
    }
  }
}

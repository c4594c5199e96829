// bench/cpu-cap.ts (BENCH_PROCESS_CPU of bench/throughput.ts): a process placed under a cap is in a
// cgroup of its own whose quota is the share asked for, and the groups go when removed. Where the
// machine cannot cap (no cpu controller, or a user who may not write to the hierarchy), the cap
// refuses at once with the reason, before any benchmark has run.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CpuCap } from '../bench/cpu-cap.ts';

/** The cgroup directory of `pid` in the hierarchy with the cpu controller (v2's one line, or v1's `cpu` line). */
function cpuGroupOf(pid: number): string {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n');
  const v1 = lines.find((l) => l.split(':')[1]!.split(',').includes('cpu'));
  if (v1) return `/sys/fs/cgroup/cpu${v1.split(':')[2]}`;
  return `/sys/fs/cgroup${lines.find((l) => l.startsWith('0::'))!.slice(3)}`;
}

function quotaOf(dir: string): { quota: number; period: number } {
  if (existsSync(`${dir}/cpu.max`)) {
    const [quota, period] = readFileSync(`${dir}/cpu.max`, 'utf8').trim().split(' ');
    return { quota: Number(quota), period: Number(period) };
  }
  return {
    quota: Number(readFileSync(`${dir}/cpu.cfs_quota_us`, 'utf8')),
    period: Number(readFileSync(`${dir}/cpu.cfs_period_us`, 'utf8')),
  };
}

describe('BENCH_PROCESS_CPU: a CPU quota per server process', () => {
  it('refuses a share that is not a positive number', () => {
    for (const share of [0, -1, Number.NaN]) expect(() => new CpuCap(share)).toThrow(/BENCH_PROCESS_CPU must be a positive fraction/);
  });

  it('puts each process in a group of its own with the share as its quota, and removes the groups', async () => {
    let cap: CpuCap;
    try {
      cap = new CpuCap(0.3);
    } catch (err) {
      // this machine or user cannot cap: the reason, before any process was started
      expect((err as Error).message).toMatch(
        /^BENCH_PROCESS_CPU: (no cgroup hierarchy|cannot make a cgroup|cannot enable the cpu controller)/,
      );
      // root with a writable cgroup v1 cpu hierarchy (this project's CI machines) can always cap
      const v1Writable = existsSync('/sys/fs/cgroup/cpu/cpu.cfs_quota_us') && !readOnly('/sys/fs/cgroup/cpu');
      expect(process.getuid?.() === 0 && v1Writable, (err as Error).message).toBe(false);
      return;
    }
    const children = [0, 1].map(() => spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }));
    try {
      for (const child of children) cap.place(child.pid!);
      const groups = children.map((child) => cpuGroupOf(child.pid!));
      expect(new Set(groups).size).toBe(2);
      for (const dir of groups) {
        expect(dir).toMatch(new RegExp(`/svc-bench-${process.pid}-\\d+$`));
        const { quota, period } = quotaOf(dir);
        expect(quota / period).toBeCloseTo(0.3, 5);
      }
      await Promise.all(children.map((child) => new Promise((ok) => (child.once('exit', ok), child.kill('SIGKILL')))));
      cap.remove();
      for (const dir of groups) expect(existsSync(dir)).toBe(false);
    } finally {
      for (const child of children) child.kill('SIGKILL');
      cap.remove();
    }
  });
});

/** Whether the filesystem holding `dir` is mounted read-only. */
function readOnly(dir: string): boolean {
  const mount = readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .find((f) => f[1] === dir);
  return mount !== undefined && mount[3]!.split(',').includes('ro');
}

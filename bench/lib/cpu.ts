// CPU time of processes on this machine, read from /proc, to say what each
// process spends per request: a figure that, unlike req/s on a shared 2-core
// machine, does not depend on how many other processes compete for the cores.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

const TICKS_PER_S = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

/** User + system CPU of a process so far, in microseconds (this process: exact; others: clock ticks). */
export function cpuMicros(pid: number): number {
  if (pid === process.pid) {
    const u = process.cpuUsage();
    return u.user + u.system;
  }
  // Fields after the command name (which may hold spaces) start at the state, field 3; utime and stime are 14 and 15.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / TICKS_PER_S) * 1e6;
}

const sum = (pids: number | number[]) => [pids].flat().reduce((n, pid) => n + cpuMicros(pid), 0);

/** Runs `work` and answers each named process's (or group's) CPU microseconds per unit of work it reports. */
export async function cpuPer<T extends { requests: number }>(
  pids: Record<string, number | number[]>,
  work: () => Promise<T>,
): Promise<{ result: T; usPer: Record<string, number> }> {
  const before = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, sum(p)]));
  const result = await work();
  const usPer = Object.fromEntries(Object.entries(pids).map(([k, p]) => [k, (sum(p) - before[k]!) / Math.max(1, result.requests)]));
  return { result, usPer };
}

export const fmtCpu = (usPer: Record<string, number>, unit = "request") =>
  Object.entries(usPer)
    .map(([k, v]) => `${k} ${v.toFixed(0)}`)
    .join(", ") + ` us CPU per ${unit}`;

/** A process's resident memory now (VmRSS), in MB. */
export const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

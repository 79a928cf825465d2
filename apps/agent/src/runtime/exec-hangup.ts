// Ending a command whose client left, when it has no terminal. With a tty the
// engine closes the pty and the kernel hangs the command up; without one the
// command only sees its stdin end, and `sleep`, a server or a training loop
// keeps running with nobody to read it (`docker exec` and `kubectl exec` leave
// it so). Docker has no API to signal an exec'd process, but it reports the
// process's id on this host, and runc makes every exec'd process the leader of
// its own session and process group: the agent, which runs as root beside the
// engine, signals that group as a hang-up would, then kills what ignored it.
//
// Signalled only after checking, from /proc, that the id is a process of that
// very container: an agent talking to a remote engine, or running in a container
// of its own, sees other processes (or none) under that number, and then
// signals nothing.
import { readFile } from "node:fs/promises";

/** What ignores the hang-up this long is killed. */
export const HANGUP_GRACE_MS = 2_000;

/** Whether a /proc/<pid>/cgroup text puts the process in the container (cgroupfs: /docker/<id>; systemd: docker-<id>.scope). */
export function cgroupOfContainer(cgroupText: string, containerId: string): boolean {
  if (!/^[0-9a-f]{64}$/.test(containerId)) return false;
  return cgroupText.split("\n").some((line) => {
    const path = line.split(":").slice(2).join(":");
    return path.split("/").some((part) => part === containerId || part === `docker-${containerId}.scope`);
  });
}

/** The start time (in clock ticks since boot) from a /proc/<pid>/stat text: with the pid, a process's identity, since pids are reused. */
export function startTimeOf(statText: string): string | undefined {
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the fields after it are plain.
  const fields = statText.slice(statText.lastIndexOf(")") + 2).split(" ");
  return fields[19]; // field 22 of proc(5), the 20th after comm
}

/** What /proc says of a process: its cgroups and when it started; undefined when there is no such process here. */
export type ProcessIdentity = { cgroup: string; startTime: string | undefined };

export interface HangUpDeps {
  identify(pid: number): Promise<ProcessIdentity | undefined>;
  /** kill(2); false when it failed */
  signal(pid: number, signal: NodeJS.Signals): boolean;
  /** whether the exec's process still runs, by the engine */
  running(): Promise<boolean>;
  sleep(ms: number): Promise<void>;
}

export const hostHangUpDeps = (running: () => Promise<boolean>): HangUpDeps => ({
  identify: async (pid) => {
    const [cgroup, stat] = await Promise.all([readFile(`/proc/${pid}/cgroup`, "utf8"), readFile(`/proc/${pid}/stat`, "utf8")]).catch(() => []);
    return cgroup === undefined || stat === undefined ? undefined : { cgroup, startTime: startTimeOf(stat) };
  },
  signal: (pid, signal) => {
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  },
  running,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
});

export type HangUpOutcome = "ended" | "hung-up" | "killed" | "not-ours";

/** SIGHUP to the exec's process group, SIGKILL to it after HANGUP_GRACE_MS if it still runs. */
export async function hangUpExec(pid: number, containerId: string, deps: HangUpDeps, graceMs = HANGUP_GRACE_MS): Promise<HangUpOutcome> {
  if (!(await deps.running())) return "ended";
  const first = await deps.identify(pid);
  if (!first?.startTime || !cgroupOfContainer(first.cgroup, containerId)) return "not-ours";
  // Still the process first seen: a number freed and taken again by another is left alone.
  const same = async () => {
    const now = await deps.identify(pid);
    return now !== undefined && now.startTime === first.startTime && cgroupOfContainer(now.cgroup, containerId);
  };
  // The group first (a shell's children too); the process alone if it leads none.
  if (!deps.signal(-pid, "SIGHUP")) deps.signal(pid, "SIGHUP");
  for (let waited = 0; waited < graceMs; waited += 100) {
    await deps.sleep(100);
    if (!(await deps.running())) return "hung-up";
  }
  if (!(await same())) return "hung-up"; // gone, and its number perhaps someone else's by now
  if (!deps.signal(-pid, "SIGKILL")) deps.signal(pid, "SIGKILL");
  return "killed";
}

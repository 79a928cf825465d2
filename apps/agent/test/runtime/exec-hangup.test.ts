// The hang-up of an exec'd command whose client left, decided without Docker:
// which process ids it may signal, and in what order.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { cgroupOfContainer, type HangUpDeps, hangUpExec, type ProcessIdentity, startTimeOf } from "../../src/runtime/exec-hangup";

const ID = "5d73661f2a5bdc65af6ff0c48a2f3f7f56367531d911eb7593a7f8e27c57a9d5";
const OTHER = "0".repeat(64);

describe("cgroupOfContainer", () => {
  it("recognises the container under cgroup v2 with systemd, v2 with cgroupfs, and v1", () => {
    expect(cgroupOfContainer(`0::/system.slice/docker-${ID}.scope\n`, ID)).toBe(true);
    expect(cgroupOfContainer(`0::/docker/${ID}\n`, ID)).toBe(true);
    expect(cgroupOfContainer(`12:pids:/docker/${ID}\n11:memory:/docker/${ID}\n1:name=systemd:/docker/${ID}\n`, ID)).toBe(true);
  });

  it("refuses another container's process, the agent's own, and ids that are not a full container id", () => {
    expect(cgroupOfContainer(`0::/system.slice/docker-${OTHER}.scope\n`, ID)).toBe(false);
    expect(cgroupOfContainer("0::/system.slice/cm-agent.service\n", ID)).toBe(false);
    expect(cgroupOfContainer(`0::/docker/${ID.slice(0, 12)}\n`, ID.slice(0, 12))).toBe(false);
    expect(cgroupOfContainer(`0::/docker/${ID}-x\n`, ID)).toBe(false);
    expect(cgroupOfContainer("", ID)).toBe(false);
  });
});

describe("startTimeOf", () => {
  it("reads field 22 of /proc/<pid>/stat, whatever the command's name holds", () => {
    const stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
    expect(startTimeOf(stat)).toBe("987654");
    // This very process's, as the kernel writes it.
    expect(startTimeOf(readFileSync("/proc/self/stat", "utf8"))).toMatch(/^\d+$/);
  });
});

/** A process of the container, pid 4242, that ends on the signals it heeds; `reused` makes its number another's after the hang-up. */
function fakeProcess(options: { heeds: NodeJS.Signals[]; cgroup?: string | undefined; leadsGroup?: boolean; reusedAfterHangUp?: boolean; running?: boolean }) {
  const signals: Array<[number, NodeJS.Signals]> = [];
  let alive = options.running ?? true;
  let identity: ProcessIdentity | undefined = options.cgroup === undefined ? undefined : { cgroup: options.cgroup, startTime: "1000" };
  let now = 0;
  const deps: HangUpDeps = {
    identify: async () => identity,
    signal: (pid, signal) => {
      if (pid < 0 && options.leadsGroup === false) return false;
      signals.push([pid, signal]);
      if (options.heeds.includes(signal)) alive = false;
      if (signal === "SIGHUP" && options.reusedAfterHangUp) identity = { cgroup: options.cgroup ?? "", startTime: "2000" };
      return true;
    },
    running: async () => alive,
    sleep: async (ms) => {
      now += ms;
    },
  };
  return { deps, signals, elapsed: () => now };
}

describe("hangUpExec", () => {
  const cgroup = `0::/system.slice/docker-${ID}.scope\n`;

  it("hangs up the process group, and stops there when that ends it", async () => {
    const p = fakeProcess({ heeds: ["SIGHUP"], cgroup });
    expect(await hangUpExec(4242, ID, p.deps)).toBe("hung-up");
    expect(p.signals).toEqual([[-4242, "SIGHUP"]]);
  });

  it("kills the group after the grace period when the hang-up is ignored", async () => {
    const p = fakeProcess({ heeds: ["SIGKILL"], cgroup });
    expect(await hangUpExec(4242, ID, p.deps, 2_000)).toBe("killed");
    expect(p.signals).toEqual([
      [-4242, "SIGHUP"],
      [-4242, "SIGKILL"],
    ]);
    expect(p.elapsed()).toBe(2_000);
  });

  it("signals the process alone when it leads no group", async () => {
    const p = fakeProcess({ heeds: ["SIGHUP"], cgroup, leadsGroup: false });
    expect(await hangUpExec(4242, ID, p.deps)).toBe("hung-up");
    expect(p.signals).toEqual([[4242, "SIGHUP"]]);
  });

  it("kills nothing when the number belongs to another process by the end of the grace period (the engine has not noticed the end yet)", async () => {
    const p = fakeProcess({ heeds: [], cgroup, reusedAfterHangUp: true });
    expect(await hangUpExec(4242, ID, p.deps, 500)).toBe("hung-up");
    expect(p.signals).toEqual([[-4242, "SIGHUP"]]);
  });

  it("signals nothing when the number is not a process of that container here (a remote engine, an agent in a container)", async () => {
    for (const other of [undefined, `0::/system.slice/docker-${OTHER}.scope\n`, "0::/user.slice/session-1.scope\n"]) {
      const p = fakeProcess({ heeds: ["SIGHUP", "SIGKILL"], cgroup: other });
      expect(await hangUpExec(4242, ID, p.deps)).toBe("not-ours");
      expect(p.signals).toEqual([]);
    }
  });

  it("signals nothing when the command already ended", async () => {
    const p = fakeProcess({ heeds: [], cgroup, running: false });
    expect(await hangUpExec(4242, ID, p.deps)).toBe("ended");
    expect(p.signals).toEqual([]);
  });
});

// The hang-up of an exec'd command whose client left, decided without Docker:
// which process ids it may signal, and in what order.
import { describe, expect, it } from "vitest";
import { cgroupOfContainer, type HangUpDeps, hangUpExec } from "../../src/runtime/exec-hangup";

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

/** A process that ends after `endsAfter` signals of the kinds it heeds. */
function fakeProcess(options: { heeds: NodeJS.Signals[]; cgroup?: string | undefined; leadsGroup?: boolean }) {
  const signals: Array<[number, NodeJS.Signals]> = [];
  let alive = true;
  let now = 0;
  const deps: HangUpDeps = {
    readCgroup: async () => (alive ? options.cgroup : undefined),
    signal: (pid, signal) => {
      if (pid < 0 && options.leadsGroup === false) return false;
      signals.push([pid, signal]);
      if (options.heeds.includes(signal)) alive = false;
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

  it("signals nothing when the number is not a process of that container here (a remote engine, an agent in a container)", async () => {
    for (const other of [undefined, `0::/system.slice/docker-${OTHER}.scope\n`, "0::/user.slice/session-1.scope\n"]) {
      const p = fakeProcess({ heeds: ["SIGHUP", "SIGKILL"], cgroup: other });
      expect(await hangUpExec(4242, ID, p.deps)).toBe("not-ours");
      expect(p.signals).toEqual([]);
    }
  });

  it("signals nothing when the command already ended", async () => {
    const p = fakeProcess({ heeds: [], cgroup });
    await p.deps.signal(1, "SIGKILL"); // not heeded; then mark it gone
    p.signals.length = 0;
    const ended: HangUpDeps = { ...p.deps, running: async () => false };
    expect(await hangUpExec(4242, ID, ended)).toBe("ended");
    expect(p.signals).toEqual([]);
  });
});

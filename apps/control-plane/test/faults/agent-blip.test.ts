import { needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FaultSystem, sleep, startFaultSystem, until } from "./support/fault-system";
import { startTcpProxy } from "./support/tcp-proxy";

// A tenant's work outlives a blip. The agent is stopped (SIGSTOP, as a stuck host
// or a network blip looks from the control plane) past the offline window
// (3 heartbeats: 6 s here) but within NODE_LOST_AFTER_S (20 s here, 300 s by
// default): the deployment stays running, its container and files untouched, and
// the paused seconds are not charged. Stopped past NODE_LOST_AFTER_S: the
// deployment is lost, failed saying so, and the returning agent stops its
// container but keeps it until the tenant deletes it.
const HEARTBEAT_MS = 2000;
const LOST_AFTER_S = 20;

const containerOf = async (id: string) =>
  (await runProgram("docker", ["ps", "-aq", "--no-trunc", "--filter", `label=cm.deployment-id=${id}`])).split("\n").filter(Boolean);
const inspect = async (cid: string) => JSON.parse(await runProgram("docker", ["inspect", cid]))[0];

needs("docker", "busybox", "postgres-server").describe("a node that loses contact for a while", () => {
  let sys: FaultSystem;
  const figures: Record<string, unknown> = {};

  /** The deployment running again, the unreachable note gone, its node online: its agent is back. */
  const backRunning = (id: string) =>
    until(
      "back and running, the note gone",
      async () => {
        const d = await sys.deployment(id);
        return d.status === "running" && d.statusReason === null && (await sys.call("GET", `/nodes/${sys.nodeId}`)).json.node.status === "online";
      },
      60_000,
    );

  beforeAll(async () => {
    sys = await startFaultSystem({ heartbeatIntervalMs: HEARTBEAT_MS, env: { NODE_LOST_AFTER_S: String(LOST_AFTER_S) } });
    await sys.startAgent();
  }, 120_000);
  afterAll(async () => {
    console.info("[faults] agent blip:", JSON.stringify(figures));
    await sys?.close();
  });

  it("ends a deployment whose agent is away longer: failed saying the node was lost; the returning agent keeps its container stopped until it is deleted", async () => {
    const id = await sys.deploy();
    await sys.waitStatus(id, "running");
    const [cid] = await containerOf(id);
    await runProgram("docker", ["exec", cid!, "sh", "-c", "echo results > /tmp/marker"]);

    sys.agent!.signal("SIGSTOP");
    const pausedAt = Date.now();
    try {
      await sys.waitStatus(id, "failed", (LOST_AFTER_S + 20) * 1000);
      figures.lostAfterS = (Date.now() - pausedAt) / 1000;
      const failed = await sys.deployment(id);
      expect(failed.statusReason).toMatch(new RegExp(`^node lost: nothing heard from it since .*, more than ${LOST_AFTER_S} s; the deployment ended there`));
      expect((await sys.repos.deployments.getOnNode(id, sys.nodeId))!.reservedMicro).toBe(0);
      // Still running on the node: nobody could tell it.
      expect(sys.runs.isRunning(id)).toBe(true);
    } finally {
      sys.agent!.signal("SIGCONT");
    }
    await until("the returning agent stops it", async () => !sys.runs.isRunning(id), 40_000);
    // Stopped, not removed: its files are there for the tenant, who reads them out (what cm cp does for a deployment that is not running).
    expect(await containerOf(id)).toEqual([cid]);
    expect((await inspect(cid!)).State.Running).toBe(false);
    const read = await fetch(`${sys.url}/deployments/${id}/files?path=/tmp/marker`, { headers: { authorization: `Bearer ${sys.token}` } });
    expect(read.status).toBe(200);
    expect(read.headers.get("content-type")).toBe("application/x-tar");
    const tar = Buffer.from(await read.arrayBuffer());
    expect(tar.subarray(0, 100).toString("utf8").replace(/\0.*$/s, "")).toBe("marker");
    expect(tar.subarray(512, 520).toString("utf8")).toBe("results\n");
    await sys.checkBooks();
    await sys.checkNothingUnwanted();

    expect((await sys.call("DELETE", `/deployments/${id}`, { token: sys.token })).status).toBe(200);
    await until("deleted: its container removed", async () => (await containerOf(id)).length === 0, 30_000);
  }, 180_000);

  it("keeps a deployment whose agent is away less than NODE_LOST_AFTER_S: same container and files, the gap not charged, every line once", async () => {
    const id = await sys.deploy();
    await sys.waitStatus(id, "running");
    const [cid] = await containerOf(id);
    await runProgram("docker", ["exec", cid!, "sh", "-c", "echo written-before > /tmp/marker"]);
    await sleep(3000);

    sys.agent!.signal("SIGSTOP");
    const pausedAt = Date.now();
    try {
      // (After the scenario above: a control plane that started moments ago gives agents its longest backoff, 30 s, first.)
      await until(
        "the node offline and the deployment unreachable",
        async () =>
          (await sys.call("GET", `/nodes/${sys.nodeId}`)).json.node.status === "offline" &&
          /^node unreachable since /.test((await sys.deployment(id)).statusReason ?? ""),
        LOST_AFTER_S * 1000 - 4000,
      );
      expect((await sys.deployment(id)).status).toBe("running");
      await sleep(2000);
    } finally {
      sys.agent!.signal("SIGCONT");
    }
    const resumedAt = Date.now();
    figures.pausedS = (resumedAt - pausedAt) / 1000;

    await backRunning(id);
    figures.backAfterS = (Date.now() - resumedAt) / 1000;
    // The same container, never restarted, its file as it was.
    expect(await containerOf(id)).toEqual([cid]);
    expect((await inspect(cid!)).RestartCount).toBe(0);
    expect(await runProgram("docker", ["exec", cid!, "cat", "/tmp/marker"])).toBe("written-before\n");
    await sleep(3000);

    const stop = await sys.stop(id);
    await sys.waitStatus(id, "stopped");
    await sys.checkBooks();
    const dep = (await sys.repos.deployments.getOnNode(id, sys.nodeId))!;
    const ranMs = sys.runs.ranMs(id, stop.askedAtMs);
    const pausedMs = resumedAt - pausedAt;
    figures.billing = { billedS: dep.billedMs / 1000, ranS: ranMs / 1000, unchargedS: (ranMs - dep.billedMs) / 1000 };
    // Not charged: the pause, and at most a heartbeat before it and the reconnection after it.
    expect(dep.billedMs, JSON.stringify(figures)).toBeLessThanOrEqual(ranMs - pausedMs + 500);
    expect(dep.billedMs, JSON.stringify(figures)).toBeGreaterThanOrEqual(ranMs - pausedMs - HEARTBEAT_MS - (Date.now() - resumedAt) - 1000);
    await until("every line stored", async () => (await sys.lineCounts(id)).max > 0);
    figures.lines = await sys.lineCounts(id);
    expect(figures.lines, "no line lost or repeated").toMatchObject({ lost: 0, repeated: 0 });
  }, 180_000);
  it("keeps a deployment across a network partition between the agent and the control plane, both processes running", async () => {
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: Number(new URL(sys.url).port) });
    try {
      await sys.agent!.stop();
      await sys.startAgent(proxy.url);
      const id = await sys.deploy();
      await sys.waitStatus(id, "running");
      const [cid] = await containerOf(id);
      await sleep(3000);

      proxy.partition();
      const cutAt = Date.now();
      await until("the deployment unreachable", async () => /^node unreachable since /.test((await sys.deployment(id)).statusReason ?? ""), 15_000);
      await sleep(Math.max(0, cutAt + 12_000 - Date.now()));
      proxy.heal();
      const healedAt = Date.now();
      figures.partitionS = (healedAt - cutAt) / 1000;
      await backRunning(id);
      figures.partitionBackAfterS = (Date.now() - healedAt) / 1000;
      expect(await containerOf(id)).toEqual([cid]);
      expect((await inspect(cid!)).RestartCount).toBe(0);
      await sleep(2000);

      const stop = await sys.stop(id);
      await sys.waitStatus(id, "stopped");
      const dep = (await sys.repos.deployments.getOnNode(id, sys.nodeId))!;
      const ranMs = sys.runs.ranMs(id, stop.askedAtMs);
      figures.partitionBilling = { billedS: dep.billedMs / 1000, ranS: ranMs / 1000, unchargedS: (ranMs - dep.billedMs) / 1000 };
      expect(dep.billedMs, JSON.stringify(figures)).toBeLessThanOrEqual(ranMs - (healedAt - cutAt) + 500);
      figures.partitionLines = await sys.lineCounts(id);
      expect(figures.partitionLines, "no line lost or repeated").toMatchObject({ lost: 0, repeated: 0 });
      await sys.checkBooks();
    } finally {
      // The next scenario's agent talks to the control plane directly.
      await sys.agent!.stop();
      await proxy.close();
      await sys.startAgent();
    }
  }, 180_000);

  it("charges a container removed while everything was stopped only for the time it existed, and never starts it again", async () => {
    const id = await sys.deploy();
    await sys.waitStatus(id, "running");
    await sleep(3000);
    // Ctrl-C on npm start: the agent and the control plane stop, the container runs on; then it is removed by hand.
    await sys.agent!.stop();
    await sys.cp.stop();
    await runProgram("docker", ["rm", "-f", ...(await containerOf(id))]);
    const removedAt = Date.now();
    await sleep(5000);
    await sys.restartControlPlane();
    await sys.startAgent();
    await sys.waitStatus(id, "failed", 60_000);
    expect((await sys.deployment(id)).statusReason).toBe("the container was removed on the node, outside the platform");
    // Never started again by itself.
    expect(await containerOf(id)).toEqual([]);
    const dep = (await sys.repos.deployments.getOnNode(id, sys.nodeId))!;
    const ranMs = sys.runs.ranMs(id, removedAt);
    figures.removedOutOfBand = { billedS: dep.billedMs / 1000, ranS: ranMs / 1000 };
    expect(dep.billedMs).toBeLessThanOrEqual(ranMs + 250);
    await sys.checkBooks();
  }, 180_000);
});

import { describeEachDatabase, needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureBusyboxImage } from "../../../agent/test/support/busybox-image";
import { openSse } from "../api/support/sse-client";
import { type System, startSystem, until } from "./support/system";

// A tenant's command and restart policy end to end: the public API, the real
// control plane and agent, and real containers made from an image that has no
// CMD of its own (docker import).

const inspect = async (id: string) => JSON.parse(await runProgram("docker", ["inspect", id]))[0];
const containersOf = async (deploymentId: string) =>
  (await runProgram("docker", ["ps", "-aq", "--filter", `label=cm.deployment-id=${deploymentId}`])).split("\n").filter(Boolean);

needs("docker", "busybox").describe("command and restart policy end to end", () => {
  describeEachDatabase("on $name", (db) => {
    let s: System;
    let tenant: { token: string; user: { id: string } };
    let bare = "";

    const api = (method: string, path: string, body?: unknown) => s.h.call(method, path, { token: tenant.token, ...(body ? { body } : {}) });
    const detail = async (id: string) => (await api("GET", `/deployments/${id}`)).json.deployment;
    const logLines = async (id: string) =>
      ((await api("GET", `/deployments/${id}/logs?tail=100`)).json.logs as Array<{ message: string }>).map((l) => l.message);
    const settled = (id: string, status: string) =>
      until(
        status,
        async () => {
          const d = await detail(id);
          return d.status === status && d;
        },
        60_000,
        s.explain(id, tenant.token),
      );

    beforeAll(async () => {
      bare = ensureBusyboxImage();
      s = await startSystem(db);
      await s.agent().start();
      tenant = await s.h.signIn();
      await s.h.grantCredits(tenant.user.id, 1_000);
      await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    }, 120_000);
    afterAll(() => s?.close(), 60_000);

    it("runs the command and entrypoint given: docker inspect shows them, the log what the command printed", async () => {
      const r = await api("POST", "/deployments", {
        nodeId: s.nodeId,
        customImage: bare,
        entrypoint: ["/bin/sh", "-c"],
        command: ['echo "hello from the command"; sleep 600'],
      });
      expect(r.status, r.text).toBe(201);
      const id = r.json.deployment.id;
      await settled(id, "running");
      const [container] = await containersOf(id);
      const c = await inspect(container!);
      expect(c.Config.Entrypoint).toEqual(["/bin/sh", "-c"]);
      expect(c.Config.Cmd).toEqual(['echo "hello from the command"; sleep 600']);
      await until("its line", async () => (await logLines(id)).includes("hello from the command"), 30_000);
      await api("DELETE", `/deployments/${id}`);
    });

    it("refuses at create an image the node holds with neither a CMD nor a command, holding nothing", async () => {
      const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: bare });
      expect(r.status).toBe(422);
      expect(r.json.error).toMatchObject({
        code: "IMAGE_HAS_NO_COMMAND",
        message: `node ${s.nodeId} holds ${bare} with neither a CMD nor an ENTRYPOINT, and runs its own copy as it is: give a command, e.g. cm deploy --image ${bare} -- CMD ARGS..., or "command" in the body`,
      });
      expect((await api("GET", "/credits/balance")).json.balance.reserved).toBe(0);
    });

    it("fails on the node, saying how to give a command, an image without CMD its agent has not reported yet", async () => {
      // Tagged after the agent's last report (they come every 10 minutes): only the node can tell.
      const late = `cm-test-bare-late:${Date.now()}`;
      await runProgram("docker", ["tag", bare, late]);
      try {
        const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: late });
        expect(r.status, r.text).toBe(201);
        const failed = await settled(r.json.deployment.id, "failed");
        expect(failed.statusReason).toBe(
          `the image ${late} has no CMD (nor ENTRYPOINT) and the deployment gives no command: give one, e.g. cm deploy --image ${late} -- CMD ARGS..., or "command" in POST /deployments`,
        );
        expect((await s.h.deps.repos.deployments.get(r.json.deployment.id))?.totalCostMicro).toBe(0);
      } finally {
        await runProgram("docker", ["rmi", late]);
      }
    });

    it("restarts a failing command up to maxRestarts, each restart in the events, then fails; every run's output is in the log", async () => {
      // Long enough a run that each state is seen by the events stream; it is a stream of states, not of every step.
      const command = ["sh", "-c", "echo run $RANDOM; sleep 2; exit 3"];
      const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: bare, command, restart: "on-failure", maxRestarts: 2 });
      expect(r.status, r.text).toBe(201);
      const id = r.json.deployment.id;
      const events = await openSse(`${s.h.url}/deployments/${id}/events`, tenant.token);
      const failed = await settled(id, "exited");
      expect(failed).toMatchObject({
        restart: "on-failure",
        maxRestarts: 2,
        restartCount: 2,
        exitCode: 3,
        statusReason: "the container exited with code 3; not restarted: all 2 restarts were used",
      });
      await until("the events stream's end", async () => events.ended());
      const states = events.events.filter((e) => !e.event).map((e) => JSON.parse(e.data!));
      // Each restart is a move from running back to starting, saying which it is.
      const restarts = states.filter((d) => d.status === "starting" && d.restartCount > 0).map((d) => d.statusReason);
      expect([...new Set(restarts)]).toEqual([
        "the container exited with code 3; restarting (1 of 2) in 1 s",
        "the container exited with code 3; restarting (2 of 2) in 2 s",
      ]);
      // Running once per run (shown again as its cost grows).
      expect([...new Set(states.filter((d) => d.status === "running").map((d) => d.restartCount))]).toEqual([0, 1, 2]);
      expect(states.at(-1)).toMatchObject({ status: "exited", restartCount: 2 });

      await until("three runs' lines", async () => (await logLines(id)).filter((l) => l.startsWith("run ")).length === 3, 30_000);
      // Each run is a new container; the ones before it are gone.
      expect(await containersOf(id)).toHaveLength(1);
      // Charged for three runs of about 2 s each and the restarts' waits (1 s, then 2 s) that held the slot.
      const row = (await s.h.deps.repos.deployments.get(id))!;
      expect(row.billedMs).toBeGreaterThanOrEqual(3 * 1_500 + 3_000);
      expect(row.billedMs).toBeLessThanOrEqual(row.stoppedAt! - row.createdAt);
      expect(row.reservedMicro).toBe(0);
    }, 120_000);
  });
});

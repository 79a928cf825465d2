import type { DeploymentRow } from "@cm/db";
import { DEPLOYMENT_STATUSES, DESIRED_STATES, type DeploymentStatus, isLive, ObservedStatus, TENANT_ACTIONS } from "@cm/protocol";
import { describe, expect, it } from "vitest";
import { planReport } from "../../src/agents/status-reports";
import { MOVES } from "../../src/services/deployment-moves";

const allowed = (from: DeploymentStatus, to: DeploymentStatus) => MOVES[from][to] !== undefined;

describe("the moves table", () => {
  it("settles exactly what crossing into or out of the live states and leaving running needs", () => {
    for (const from of DEPLOYMENT_STATUSES) {
      for (const [to, settles] of Object.entries(MOVES[from]) as Array<[DeploymentStatus, { hold?: true; charge?: true; release?: true }]>) {
        const move = `${from} -> ${to}`;
        expect(Boolean(settles.hold), move).toBe(!isLive(from) && isLive(to));
        expect(Boolean(settles.release), move).toBe(isLive(from) && !isLive(to));
        expect(Boolean(settles.charge), move).toBe(from === "running" && to !== "running");
      }
    }
  });

  it("has every move the tenant's actions make", () => {
    for (const from of TENANT_ACTIONS.start) expect(allowed(from, "starting"), from).toBe(true);
    // A stop lands in stopping, or in stopped when no agent is there to carry it out.
    for (const from of TENANT_ACTIONS.stop) expect(allowed(from, "stopping") && allowed(from, "stopped"), from).toBe(true);
    // A delete stops what is live and leaves the rest where it is.
    for (const from of DEPLOYMENT_STATUSES) expect(allowed(from, isLive(from) ? "stopped" : from), from).toBe(true);
  });

  it("has every move an agent's report, a lost node and the meter make", () => {
    const base = {
      id: "dep_1",
      userId: "usr_1",
      nodeId: "node_1",
      templateId: null,
      name: null,
      image: "busybox",
      statusReason: null,
      exitCode: null,
      env: {},
      ports: [],
      tcpPorts: [],
      command: null,
      entrypoint: null,
      registryCredentialId: null,
      restartPolicy: "no",
      maxRestarts: 0,
      restartCount: 0,
      endpoints: [],
      hourlyRateCents: 50,
      totalCostMicro: 0,
      reservedMicro: 0,
      billedUntil: null,
      billedMs: 0,
      runSeq: 2,
      createdAt: 0,
      startedAt: null,
      stoppedAt: null,
      updatedAt: 0,
      deletedAt: null,
      removedFromNodeAt: null,
      gpuCount: 0,
      cpuMillicores: 0,
      cpuLimit: "weight",
      memoryMb: 0,
      diskGb: null,
      endpointKey: "k",
    } satisfies Omit<DeploymentRow, "status" | "desiredState">;
    for (const status of DEPLOYMENT_STATUSES) {
      for (const desiredState of DESIRED_STATES) {
        for (const reported of ObservedStatus.options) {
          for (const exitCode of [undefined, 0, 1]) {
            const plan = planReport(
              { ...base, status, desiredState },
              { at: 1000, runSeq: 2, status: reported, ...(exitCode === undefined ? {} : { exitCode }) },
              2000,
            );
            if (plan.kind === "move") expect(allowed(status, plan.to), `${status} (${desiredState}) reported ${reported}: to ${plan.to}`).toBe(true);
          }
        }
      }
      if (isLive(status)) expect(allowed(status, status === "stopping" ? "stopped" : "failed"), `${status}: node lost`).toBe(true);
    }
    expect(allowed("running", "stopping") && allowed("running", "stopped")).toBe(true);
  });
});

import { type AgentFrame, isLive } from "@cm/protocol";
import type { AgentSession } from "./agent-session";
import { ingestCost, storedLine } from "./log-limits";
import { planReport, pullReason } from "./status-reports";

type FrameOf<T extends AgentFrame["type"]> = Extract<AgentFrame, { type: T }>;
type Handlers = { [K in Exclude<AgentFrame["type"], "hello">]: (s: AgentSession, f: FrameOf<K>) => Promise<void> | void };

/** Pull progress reaches the database at most this often per deployment; the rest is noise. */
const PULL_NOTE_EVERY_MS = 1000;

/** Frames after the handshake, one handler each; the session calls them in arrival order. */
const handlers: Handlers = {
  async specs(s, f) {
    const { repos, events, log } = s.ctx;
    // Index and uuid are for the agent's own assignment; the catalogue shows the rest.
    const gpus = f.gpus.map(({ index: _index, uuid: _uuid, ...gpu }) => gpu);
    const policies = { egressPolicy: f.egressPolicy ?? null, diskDefaultGb: f.diskDefaultGb ?? null };
    // A node is online only once its specs are known: the first report after hello brings it online, in turn with
    // its other presence changes so a node lost meanwhile stays offline.
    await s.ctx.hub.serialize(s.nodeId, () => repos.nodes.updateInventory(s.nodeId, f.specs, gpus, policies, { connected: s.ctx.hub.isConnected(s.nodeId) }));
    s.imagesWithoutCommand = new Set(f.imagesWithoutCommand ?? []);
    events.emit("node-changed", s.nodeId);
    if (f.gpuWarning) log.warn("agent: GPU warning", { nodeId: s.nodeId, warning: f.gpuWarning });
  },

  tunnel_error(s, f) {
    s.ctx.events.emit("tunnel-error", f.tunnelId, s.nodeId, f.reason, f.code);
  },

  async endpoints(s, f) {
    // A custom image's EXPOSE ports become its endpoints when the tenant named none.
    await s.ctx.repos.deployments.setPortsIfEmpty(
      f.deploymentId,
      s.nodeId,
      f.ports.map((p) => p.port),
    );
    await s.ctx.repos.deployments.setEndpointReadiness(f.deploymentId, s.nodeId, f.ports);
    s.ctx.events.emit("deployment-touched", f.deploymentId);
  },

  heartbeat() {
    // Taken on arrival by the session (AgentSession.receive), never queued behind database writes.
  },

  async status(s, f) {
    const { repos, moves, events, clock, log } = s.ctx;
    let dep = await repos.deployments.getOnNode(f.deploymentId, s.nodeId);
    // Another writer (the API, the meter) may move it between the read and the
    // transition; the report is then judged again against the fresh row.
    for (let attempt = 0; dep && attempt < 3; attempt++) {
      const plan = planReport(dep, f, clock.now());
      if (plan.kind === "ignore") return log.debug("agent: status report ignored", { nodeId: s.nodeId, deploymentId: dep.id, why: plan.why });
      if (plan.kind === "removed") {
        await repos.deployments.markRemovedFromNode(dep.id, s.nodeId, clock.now());
        return;
      }
      const moved = await moves.move(dep, plan.to, { patch: plan.patch, nowMs: clock.now(), settleUntilMs: plan.settleUntilMs });
      if (moved.ok) {
        s.pullNotedAt.delete(dep.id);
        events.emit("deployment-changed", moved.row);
        if (isLive(dep.status) !== isLive(moved.row.status)) events.emit("node-changed", s.nodeId);
        return;
      }
      dep = await repos.deployments.getOnNode(f.deploymentId, s.nodeId);
    }
    if (!dep) log.debug("agent: status report for a deployment not on this node", { nodeId: s.nodeId, deploymentId: f.deploymentId });
  },

  async pull_progress(s, f) {
    const nowMs = s.ctx.clock.now();
    if (!s.known.has(f.deploymentId) || nowMs - (s.pullNotedAt.get(f.deploymentId) ?? -Infinity) < PULL_NOTE_EVERY_MS) return;
    s.pullNotedAt.set(f.deploymentId, nowMs);
    await s.ctx.repos.deployments.notePulling(f.deploymentId, s.nodeId, pullReason(f));
    s.ctx.events.emit("deployment-touched", f.deploymentId);
  },

  async logs(s, f) {
    const { repos, clock } = s.ctx;
    if (!s.known.has(f.deploymentId) && !(await repos.deployments.getOnNode(f.deploymentId, s.nodeId))) {
      s.send({ type: "error", code: "UNKNOWN_DEPLOYMENT", message: `deployment ${f.deploymentId} is not on this node; its logs were dropped` });
      return;
    }
    const nowMs = clock.now();
    const lines = f.lines.map((l) => storedLine(l, nowMs));
    if (!s.ctx.hub.logBudget(s.nodeId).take(ingestCost(lines), nowMs)) {
      // No ack: the agent keeps the batch and sends it again later, reading its container's log no faster than we store it.
      s.send({
        type: "error",
        code: "LOGS_RATE_LIMITED",
        message: `this node sends more log text than ${s.ctx.logIngestBytesPerS} bytes a second; the batch ending at line ${f.lines.at(-1)!.seq} was not stored, send it again later`,
      });
      return;
    }
    if ((await repos.logIngest.append(f.deploymentId, lines)) > 0) s.ctx.events.emit("logs-stored", f.deploymentId);
    const last = f.lines.reduce((a, b) => (b.seq > a.seq ? b : a));
    s.send({ type: "logs_ack", deploymentId: f.deploymentId, cursor: { seq: last.seq, dockerTs: last.ts } });
  },

  ack(s, f) {
    if (!f.ok) s.log.warn("agent: command failed", { commandId: f.commandId, error: f.error });
  },

  error(s, f) {
    s.log.warn("agent: error frame", { code: f.code, message: f.message });
  },
};

export function handleFrame(s: AgentSession, f: Exclude<AgentFrame, { type: "hello" }>): Promise<void> | void {
  return (handlers[f.type] as (s: AgentSession, f: AgentFrame) => Promise<void> | void)(s, f);
}

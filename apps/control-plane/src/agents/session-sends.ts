// What a session tells its agent of the node's desired state: the whole of it
// after welcome (the sync, in parts below the agent's frame limit), then one
// command per change. A spec the agent cannot receive fails its deployment,
// as if the agent had reported it, rather than wait forever.
import type { DeploymentRow } from "@cm/db";
import type { DeploymentSpec } from "@cm/protocol";
import type { AgentSession } from "./agent-session";
import { commandAction, diskGbFor, lostRetention, needsPull, specKey, syncParts, toSpec } from "./desired-state";
import { handleFrame } from "./frame-handlers";

/**
 * The most one sync part weighs. Parts far below the agent's limit keep one
 * frame from holding the agent's socket (and heap) for long; a node's whole
 * history of stopped deployments (a few hundred bytes each) still takes few.
 */
const SYNC_PART_MAX_BYTES = 1024 * 1024;

/** The registry login the spec carries, opened only when the agent may pull with it (needsPull). Never logged. */
async function registryAuthFor(s: AgentSession, d: DeploymentRow) {
  return needsPull(d) && s.ctx.registryAuth ? s.ctx.registryAuth(d.registryCredentialId!) : undefined;
}

/** The node's whole desired state, read after the session became ready so no change falls between it and the commands. */
export async function sendSync(s: AgentSession): Promise<void> {
  const { repos, hub } = s.ctx;
  const deps = await repos.deployments.desiredForNode(s.nodeId);
  const cursors = await repos.logIngest.cursors(deps.map((d) => d.id));
  const templates = await hub.templateNeeds();
  for (const d of deps) s.known.set(d.id, specKey(d));
  const specs: DeploymentSpec[] = [];
  for (const d of deps)
    specs.push({ ...toSpec(d, cursors.get(d.id), diskGbFor(d, templates), await registryAuthFor(s, d)), ...lostRetention(d, s.ctx.lostRetentionMs) });
  const { parts, tooBig } = syncParts(specs, Math.min(SYNC_PART_MAX_BYTES, s.agentMaxFrameBytes), s.agentMaxFrameBytes);
  for (const [i, part] of parts.entries()) {
    if (!s.send({ type: "sync", deployments: part, ...(i < parts.length - 1 ? { more: true } : {}) })) return;
  }
  for (const spec of tooBig) await unsendable(s, spec);
}

/** Tells the agent about a change, unless it already knows this desired state. */
export async function sendChange(s: AgentSession, dep: DeploymentRow): Promise<void> {
  const prev = s.known.get(dep.id);
  if (dep.removedFromNodeAt !== null || prev === specKey(dep)) return;
  s.known.set(dep.id, specKey(dep));
  const cursor = (await s.ctx.repos.logIngest.cursors([dep.id])).get(dep.id);
  const templates = await s.ctx.hub.templateNeeds();
  const spec = { ...toSpec(dep, cursor, diskGbFor(dep, templates), await registryAuthFor(s, dep)), ...lostRetention(dep, s.ctx.lostRetentionMs) };
  if (!s.send({ type: "command", commandId: s.ctx.ids("cmd"), action: commandAction(dep, prev !== undefined), deployment: spec })) await unsendable(s, spec);
  else s.ctx.commandWakes.delivered(dep.updatedAt, s.ctx.clock.now());
}

/**
 * A deployment whose spec alone is larger than the agent reads (its env from
 * before env was bounded, or an agent with a small limit) can never reach the
 * node: it fails, as if the agent had reported it.
 */
async function unsendable(s: AgentSession, spec: DeploymentSpec) {
  if (spec.desiredState !== "running") return;
  await handleFrame(s, {
    type: "status",
    deploymentId: spec.deploymentId,
    runSeq: spec.runSeq,
    status: "failed",
    reason: `its settings (env) are too large for this node's agent to receive (over ${s.agentMaxFrameBytes} bytes); recreate it with a smaller env`,
    at: s.ctx.clock.now(),
  });
}

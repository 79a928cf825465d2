import type { DeploymentRow, Repos } from "@cm/db";
import type { EventBus } from "../services/events";
import type { EndpointResolver, Resolution } from "./ports";

type Seen = Pick<DeploymentRow, "id" | "nodeId" | "status" | "ports"> | undefined;

/**
 * `<endpointKey>-<port>` to the deployment and port it names. A stopped or
 * deleted deployment, a port it does not expose, or a node without its agent
 * each answer their own way, so the gateway can say which.
 *
 * Lookups are remembered for up to `ttlMs` (every request would otherwise
 * queue a database read behind log ingestion) and forgotten at once when this
 * replica changes any deployment; whether the node's agent is connected (here,
 * or to the replica a request is carried to) is checked on every request.
 */
export function createEndpointResolver(
  repos: Repos,
  isConnected: (nodeId: string) => boolean | Promise<boolean>,
  o: { events: EventBus; ttlMs: number; now: () => number },
): EndpointResolver {
  const cache = new Map<string, { dep: Seen; at: number }>();
  o.events.on("deployment-changed", () => cache.clear());

  async function lookup(key: string): Promise<Seen> {
    const hit = cache.get(key);
    if (hit && o.now() - hit.at < o.ttlMs) return hit.dep;
    const row = await repos.deployments.byEndpointKey(key);
    const dep = row && { id: row.id, nodeId: row.nodeId, status: row.status, ports: row.ports };
    if (cache.size > 10_000) cache.clear();
    cache.set(key, { dep, at: o.now() });
    return dep;
  }

  return {
    async resolve(label: string): Promise<Resolution> {
      // One spelling per endpoint: `-08080` beside `-8080` would give one endpoint
      // two origins (two cookie jars, two cache keys, two names in every log).
      const m = /^([a-z2-7]{16})-([1-9]\d{0,4})$/.exec(label);
      if (!m) return { kind: "unknown_host" };
      const port = Number(m[2]);
      const dep = await lookup(m[1]!);
      if (!dep || !dep.ports.includes(port)) return { kind: "unknown_host" };
      if (dep.status !== "running") return { kind: "not_running" };
      if (!(await isConnected(dep.nodeId))) return { kind: "node_unreachable" };
      return { kind: "ok", target: { deploymentId: dep.id, nodeId: dep.nodeId, port } };
    },
  };
}

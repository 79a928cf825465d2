import type { Repos } from "@cm/db";
import type { EndpointResolver, Resolution } from "./proxy";

/**
 * `<endpointKey>-<port>` to the deployment and port it names. A stopped or
 * deleted deployment, a port it does not expose, or a node without its agent
 * each answer their own way, so the gateway can say which.
 */
export function createEndpointResolver(repos: Repos, isConnected: (nodeId: string) => boolean): EndpointResolver {
  return {
    async resolve(label: string): Promise<Resolution> {
      const m = /^([a-z2-7]{16})-(\d{1,5})$/.exec(label);
      if (!m) return { kind: "unknown_host" };
      const port = Number(m[2]);
      const dep = await repos.deployments.byEndpointKey(m[1]!);
      if (!dep || !dep.ports.includes(port)) return { kind: "unknown_host" };
      if (dep.status !== "running") return { kind: "not_running" };
      if (!isConnected(dep.nodeId)) return { kind: "node_unreachable" };
      return { kind: "ok", target: { deploymentId: dep.id, nodeId: dep.nodeId, port } };
    },
  };
}

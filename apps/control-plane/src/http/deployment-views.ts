import type { DeploymentRow } from "@cm/db";
import type { Deployment } from "@cm/protocol";
import { diskAllowanceGb } from "../agents/desired-state";
import type { Deps } from "../deps";
import { presentDeployment } from "./presenters";

/**
 * Deployments as the API answers them. Beside its row, each needs its disk
 * allowance: its template's (from the catalogue the agent hub keeps) or, for a
 * custom image, its node's default as the node's agent told it, read for a
 * whole page at once.
 */
export function deploymentViews(deps: Pick<Deps, "repos" | "agents" | "gateway">) {
  async function many(rows: readonly DeploymentRow[]): Promise<Deployment[]> {
    const [templates, nodeDefaults] = await Promise.all([
      deps.agents.templateNeeds(),
      deps.repos.nodes.diskDefaults(rows.filter((d) => d.templateId === null).map((d) => d.nodeId)),
    ]);
    const gateway = deps.gateway();
    return rows.map((d) => presentDeployment(d, gateway, diskAllowanceGb(d, templates, nodeDefaults.get(d.nodeId))));
  }
  return {
    many,
    one: async (row: DeploymentRow): Promise<Deployment> => (await many([row]))[0]!,
  };
}

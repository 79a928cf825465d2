import { expect } from "vitest";
import { type AgentHarness, eventually } from "../../../control-plane/test/agents/support/agent-harness";
import { SimAgent } from "../../../control-plane/test/agents/support/sim-agent";
import type { terminal } from "./cli";

/**
 * The operator at `op` (its keypair written) signs in with cm and enrols a node with
 * `cm operator add`; a simulated agent with one GPU connects with the token cm printed,
 * and the node is online with its specs. What the operator tests start from.
 */
export async function enrolNodeFromCli(h: AgentHarness, op: ReturnType<typeof terminal>, node: { name: string; rate: number; max: number }) {
  expect((await op.cm(["login"])).code).toBe(0);
  const add = await op.cm([
    "operator",
    "add",
    "--name",
    node.name,
    "--region",
    "eu-west",
    "--country",
    "DE",
    "--rate",
    String(node.rate),
    "--max",
    String(node.max),
  ]);
  expect(add.code, add.stderr).toBe(0);
  const nodeId = add.stdout.trim().split("\n")[0]!;
  const token = /AGENT_TOKEN=(\S+) /.exec(add.stdout)![1]!;
  const { agent } = await SimAgent.connect(h.url, token, { gpus: 1 });
  await eventually(async () => expect(await h.deps.repos.nodes.get(nodeId)).toMatchObject({ status: "online", gpuCount: 1 }));
  return { nodeId, agent };
}

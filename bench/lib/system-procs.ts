import { type ChildProcess, fork, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";

const docker = new Docker();

export type Plane = { url: string; agentToken: string; nodeId: string; tenantToken: string };

/**
 * The control plane and the agent each in a process of their own, as in
 * production (where they are on different machines), so the load generator
 * in this process does not share their event loops.
 */
export async function startProcesses(options: { agentEnv?: Record<string, string> } = {}) {
  const plane = fork(fileURLToPath(new URL("./endpoint-plane.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx", ...(process.env.PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.PROF_DIR}`] : [])],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const info = await new Promise<Plane>((resolve, reject) => {
    plane.once("message", (m) => resolve(m as Plane));
    plane.once("exit", (c) => reject(new Error(`control plane exited ${c}`)));
  });
  const agent: ChildProcess = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      ...(process.env.PROF_DIR ? ["--cpu-prof", `--cpu-prof-dir=${process.env.PROF_DIR}/agent`] : []),
      "apps/agent/src/index.ts",
      "--control-plane",
      info.url,
      "--token",
      info.agentToken,
    ],
    {
      stdio: ["ignore", process.env.AGENT_LOG_LEVEL ? "inherit" : "ignore", "inherit"],
      // AGENT_NODE_OPTIONS: Node flags for the agent alone (the release's wrapper gives it its own).
      env: { ...process.env, LOG_LEVEL: process.env.AGENT_LOG_LEVEL ?? "warn", NODE_OPTIONS: process.env.AGENT_NODE_OPTIONS ?? "", ...options.agentEnv },
    },
  );
  const call = async (method: string, path: string, body?: unknown) => {
    const r = await fetch(info.url + path, {
      method,
      headers: { authorization: `Bearer ${info.tenantToken}`, "content-type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    return (await r.json()) as any;
  };
  for (let i = 0; i < 300; i++) {
    const n = (await (await fetch(`${info.url}/nodes/${info.nodeId}`)).json()) as { node: { status: string } };
    if (n.node.status === "online") break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    ...info,
    call,
    pids: { plane: plane.pid!, agent: agent.pid! },
    /** Ends both processes, then removes what the agent left on the engine: its bench node never comes back. */
    async stop() {
      const agentExit = new Promise((resolve) => agent.once("exit", resolve));
      agent.kill("SIGTERM");
      plane.kill("SIGTERM");
      await agentExit;
      await removeNodeLeftovers(info.nodeId);
    },
  };
}

/** Removes every container and network an agent made for the bench's node: that node never comes back for them. */
export async function removeNodeLeftovers(nodeId: string): Promise<void> {
  const byNode = { label: [`cm.node-id=${nodeId}`] };
  for (const c of await docker.listContainers({ all: true, filters: byNode }))
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => {});
  for (const n of await docker.listNetworks({ filters: byNode }))
    await docker
      .getNetwork(n.Id)
      .remove()
      .catch(() => {});
}

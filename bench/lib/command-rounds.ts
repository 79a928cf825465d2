// What bench/replica-commands.ts and bench/replica-scale.ts time: commands a
// tenant issues on some replica, from the API call leaving this process to the
// node's agent (a SimAgent here) holding the command frame.
import type { SimAgent } from "../../apps/control-plane/test/agents/support/sim-agent";
import { median } from "./median";

export const p95 = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.ceil(xs.length * 0.95) - 1]!;
export const summary = (xs: number[]) =>
  `median ${median(xs).toFixed(1)} ms, p95 ${p95(xs).toFixed(1)} ms, max ${Math.max(...xs).toFixed(1)} ms (${xs.length} commands)`;

/** One round on `base` (and `round.unavailable.count`, the 503s retried): a create and a stop timed, the deployment driven by the agent in between, then deleted. Answers the two times in ms. */
export function commandRounds(agent: SimAgent, nodeId: string, tenantToken: string) {
  const unavailable = { count: 0 };
  const call = async (base: string, method: string, path: string, body?: unknown): Promise<{ deployment: { status: string } }> => {
    const r = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${tenantToken}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = await r.json();
    // A replica whose database did not answer its probe in time refuses everything for a moment (503, "retry in 2 s"): a client retries, and the wait counts in the command's time.
    if (r.status === 503 && unavailable.count < 100) {
      unavailable.count++;
      await new Promise((resolve) => setTimeout(resolve, 2000));
      return call(base, method, path, body);
    }
    if (!r.ok) throw new Error(`${method} ${path} on ${base}: ${r.status} ${JSON.stringify(json)}`);
    return json;
  };
  const until = async (what: string, check: () => Promise<boolean>) => {
    for (const deadline = Date.now() + 20_000; !(await check()); await new Promise((r) => setTimeout(r, 5)))
      if (Date.now() > deadline) throw new Error(`${what}: not within 20 s`);
  };
  async function timed(issue: () => Promise<unknown>, action: "create" | "stop" | "remove") {
    const t0 = performance.now();
    const got = agent.next("command", (c) => c.action === action, 20_000);
    await issue();
    const cmd = await got;
    return { ms: performance.now() - t0, cmd };
  }
  return Object.assign(round, { unavailable });
  async function round(base: string): Promise<[number, number]> {
    const created = await timed(() => call(base, "POST", "/deployments", { nodeId, customImage: "busybox:1.36" }), "create");
    const spec = created.cmd.deployment;
    for (const s of ["pulling", "starting", "running"]) agent.report(spec, s);
    const status = async () => (await call(base, "GET", `/deployments/${spec.deploymentId}`)).deployment.status;
    await until("running", async () => (await status()) === "running");
    const stopped = await timed(() => call(base, "POST", `/deployments/${spec.deploymentId}/stop`), "stop");
    agent.report(spec, "stopped");
    await until("stopped", async () => (await status()) === "stopped");
    await timed(() => call(base, "DELETE", `/deployments/${spec.deploymentId}`), "remove");
    agent.report(spec, "removed");
    return [created.ms, stopped.ms];
  }
}

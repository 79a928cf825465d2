import { spawn } from "node:child_process";
import { runProgram } from "@cm/testkit/run-program";

type Run = { startMs: number; endMs?: number };

/**
 * When each deployment's container really ran, as Docker saw it: `docker events`
 * for one node's containers (start and die, with Docker's own timestamps), so
 * billing can be checked against the truth rather than against what the
 * control plane was told.
 */
export function watchDockerRuns(nodeId: string) {
  const runs = new Map<string, Run[]>();
  const created = new Set<string>();
  const waiters = new Set<() => void>();
  const proc = spawn("docker", ["events", "--filter", "type=container", "--filter", `label=cm.node-id=${nodeId}`, "--format", "{{json .}}"], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  let buf = "";
  proc.stdout.on("data", (chunk: Buffer) => {
    buf += chunk.toString("utf8");
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      const e = JSON.parse(line) as { status?: string; Action?: string; timeNano: number; Actor: { Attributes: Record<string, string> } };
      const dep = e.Actor.Attributes["cm.deployment-id"];
      if (!dep) continue;
      const atMs = Math.floor(e.timeNano / 1e6);
      const list = runs.get(dep) ?? [];
      runs.set(dep, list);
      const action = e.Action ?? e.status;
      if (action === "create") created.add(dep);
      if (action === "start") list.push({ startMs: atMs });
      else if (action === "die") {
        const open = list.find((r) => r.endMs === undefined);
        if (open) open.endMs = atMs;
      }
      for (const w of waiters) w();
    }
  });
  return {
    runs,
    /** Milliseconds the deployment's containers ran in all, up to `untilMs` (now by default). */
    ranMs(deploymentId: string, untilMs = Date.now()) {
      return (runs.get(deploymentId) ?? []).reduce((s, r) => s + Math.max(0, Math.min(r.endMs ?? untilMs, untilMs) - r.startMs), 0);
    },
    /** Resolves once Docker has created a container for the deployment (it has not started yet). */
    created(deploymentId: string, timeoutMs = 30_000): Promise<void> {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!created.has(deploymentId)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no container created for ${deploymentId} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    isRunning: (deploymentId: string) => (runs.get(deploymentId) ?? []).some((r) => r.endMs === undefined),
    close() {
      proc.kill();
    },
  };
}
export type DockerRuns = ReturnType<typeof watchDockerRuns>;

/** Removes the containers, then the networks, of one node (its sandboxes included). */
export async function removeNodeContainers(nodeId: string) {
  const label = `label=cm.node-id=${nodeId}`;
  const ids = (await runProgram("docker", ["ps", "-aq", "--filter", label])).split("\n").filter(Boolean);
  if (ids.length) await runProgram("docker", ["rm", "-f", ...ids]);
  const nets = (await runProgram("docker", ["network", "ls", "-q", "--filter", label])).split("\n").filter(Boolean);
  if (nets.length) await runProgram("docker", ["network", "rm", ...nets]);
}

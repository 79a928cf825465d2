/**
 * Question: what does a public endpoint cost when the visitor reaches a
 * control-plane replica other than the one holding the node's agent session
 * (the request is carried over one replica-to-replica hop), next to reaching
 * the holder, in the same run? Two replicas on one PostgreSQL database, each
 * a process of its own, the agent connected to the first, the load generator
 * in this process.
 *
 *   npx tsx bench/replica-hop.ts   (DURATION_MS=4000 CONCURRENCY=16 ROUNDS=3)
 *   npx tsx bench/replica-hop.ts --quick   (1 round of 2 s)
 *
 * Goal (issue 41): through another replica at least 0.8 of the holder's requests/s.
 * The phases alternate and the medians are compared, as in bench/endpoints.ts.
 */
import { type ChildProcess, fork, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createPgDatabase } from "@cm/db/testing";
import { until } from "../apps/control-plane/test/e2e/support/system";
import { ensureWebImage } from "../apps/control-plane/test/e2e/support/web-image";
import { freePort } from "../apps/control-plane/test/faults/support/pg-cluster";
import { quick, reportFigures } from "./lib/figures";
import { fmt, type LoadResult, load } from "./lib/load";
import { median } from "./lib/median";
import { removeNodeLeftovers } from "./lib/system-procs";

const durationMs = Number(process.env.DURATION_MS ?? (quick ? 2000 : 4000));
const concurrency = Number(process.env.CONCURRENCY ?? 16);
const rounds = Number(process.env.ROUNDS ?? (quick ? 1 : 3));

type Info = { url: string; agentToken?: string; nodeId?: string; tenantToken?: string };
const image = ensureWebImage();
const db = await createPgDatabase();
const secret = "bench-replicas-secret-0123456789abcdef";
const children: ChildProcess[] = [];
const replica = async (seed: boolean): Promise<Info> => {
  const port = await freePort();
  const child = fork(fileURLToPath(new URL("./lib/replica-plane.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, REPLICA_PORT: String(port), REPLICA_DB_URL: db.url, REPLICA_SECRET: secret, REPLICA_SEED: seed ? "1" : "0" },
  });
  children.push(child);
  return new Promise<Info>((resolve, reject) => {
    child.once("message", (m) => resolve(m as Info));
    child.once("exit", (c) => reject(new Error(`replica exited ${c}`)));
  });
};
const holder = await replica(true);
const other = await replica(false);
const agent = spawn(process.execPath, ["--import", "tsx", "apps/agent/src/index.ts", "run"], {
  stdio: ["ignore", "ignore", "inherit"],
  env: { ...process.env, CONTROL_PLANE_URL: holder.url, AGENT_TOKEN: holder.agentToken!, LOG_LEVEL: "warn", NODE_OPTIONS: "" },
});
try {
  const call = async (method: string, path: string, body?: unknown) =>
    (await (
      await fetch(holder.url + path, {
        method,
        headers: { authorization: `Bearer ${holder.tenantToken}`, "content-type": "application/json" },
        body: body ? JSON.stringify(body) : undefined,
      })
    ).json()) as any;
  await until("node online", async () => (await call("GET", `/nodes/${holder.nodeId}`)).node?.status === "online", 90_000);
  const r = await call("POST", "/deployments", { nodeId: holder.nodeId, customImage: image, ports: [8080], env: { QUIET_REQUESTS: "1" } });
  const dep = await until(
    "endpoint ready",
    async () => {
      const d = (await call("GET", `/deployments/${r.deployment.id}`)).deployment;
      return d.endpoints[0]?.ready && d;
    },
    60_000,
  );
  const host = new URL(dep.endpoints[0].url).host.replace(/:\d+$/, "");
  const phase = (base: string) => load(base, () => "/", { concurrency, durationMs, headers: { host } });
  await phase(holder.url); // warm both paths: tunnels, JIT
  await phase(other.url);
  const results: Record<"holder" | "other", LoadResult[]> = { holder: [], other: [] };
  for (let round = 1; round <= rounds; round++) {
    results.holder.push(await phase(holder.url));
    results.other.push(await phase(other.url));
    console.log(`  replica-hop: round ${round}: holder ${results.holder.at(-1)!.rps.toFixed(0)}, other replica ${results.other.at(-1)!.rps.toFixed(0)} req/s`);
  }
  const rps = (k: "holder" | "other") => median(results[k].map((x) => x.rps));
  console.log(`  replica-hop: the holder's replica   ${fmt(results.holder.at(-1)!)}`);
  console.log(`  replica-hop: another replica (hop)  ${fmt(results.other.at(-1)!)}`);
  const ratio = rps("other") / rps("holder");
  console.log(`  replica-hop: requests/s through another replica / through the holder (medians): ${ratio.toFixed(2)} (goal >= 0.8)`);
  reportFigures("replica-hop", [{ name: "endpoint through another replica / the holder", value: ratio, goal: 0.8, better: "higher" }]);
} finally {
  agent.kill("SIGTERM");
  await new Promise((resolve) => agent.once("exit", resolve));
  for (const c of children) c.kill("SIGTERM");
  await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve(null) : c.once("exit", resolve)))));
  if (holder.nodeId) await removeNodeLeftovers(holder.nodeId);
  await db.drop();
}

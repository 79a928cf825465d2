// Child process of bench/fan-in.ts: the control plane the fake agents connect
// to, alone in its process so its memory and CPU can be read from /proc. It
// seeds one node per fake agent (token `bench-agent-<i>`), listens, and prints
// `{ url, pid }` as one JSON line. SIGTERM closes it and drops its database.
//
//   node --import tsx bench/lib/fake-agents-plane.ts <sqlite|postgres> <nodes>
import fs from "node:fs";
import { createPgDatabase } from "@cm/db/testing";
import { testConfig } from "../../apps/control-plane/src/config";
import { createDeps } from "../../apps/control-plane/src/deps";
import { startServer } from "../../apps/control-plane/src/server";
import { hashSecret } from "../../apps/control-plane/src/services/ids";

const kind = process.argv[2];
const nodes = Number(process.argv[3] ?? 10_000);
const file = `/tmp/cm-fan-in-${process.pid}.db`;
const pg = kind === "postgres" ? await createPgDatabase() : undefined;
const deps = await createDeps(testConfig({ DATABASE_URL: pg?.url ?? `file:${file}`, LOG_LEVEL: "error", HEARTBEAT_INTERVAL_MS: 10_000 }));

const owner = await deps.repos.auth.upsertUser("usr_fanin", "FanInOperator11111111111111111111111111111111", deps.clock.now());
for (let i = 0; i < nodes; i++) {
  await deps.repos.nodes.create({
    id: `node_fanin${i}`,
    operatorId: owner.id,
    name: `fan-in-${i}`,
    region: "eu-west",
    country: "DE",
    hourlyRateCents: 50,
    maxDeployments: 4,
    agentTokenHash: hashSecret(`bench-agent-${i}`),
    createdAt: deps.clock.now(),
  });
}
const server = await startServer(deps, { port: 0, host: "127.0.0.1" });
process.stdout.write(JSON.stringify({ url: server.url, pid: process.pid }) + "\n");

process.on("SIGTERM", async () => {
  await server.close();
  await deps.close();
  await pg?.drop();
  for (const f of [file, `${file}-wal`, `${file}-shm`]) fs.rmSync(f, { force: true });
  process.exit(0);
});

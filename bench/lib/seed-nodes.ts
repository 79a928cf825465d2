import { REGIONS } from "@cm/protocol";
import type { Deps } from "../../apps/control-plane/src/deps";

const GPUS = [
  { name: "NVIDIA H100 80GB HBM3", vramMb: 81559 },
  { name: "NVIDIA A100-SXM4-80GB", vramMb: 81920 },
  { name: "NVIDIA GeForce RTX 4090", vramMb: 24564 },
  { name: "NVIDIA GeForce RTX 3090", vramMb: 24576 },
  { name: "NVIDIA L4", vramMb: 23034 },
];

/**
 * n nodes with a deterministic spread of regions, GPUs, sizes, prices and
 * states. Three in four are online, last heard from at `onlineAtMs`: a
 * control plane started within three heartbeat intervals of it keeps them
 * online until then, and marks them offline one by one after.
 */
export async function seedNodes(deps: Deps, n: number, o: { onlineAtMs?: number } = {}) {
  const owner = await deps.repos.auth.upsertUser("usr_bench", "BenchOperator1111111111111111111111111111111", 0);
  for (let i = 0; i < n; i++) {
    const id = `node_bench${i}`;
    await deps.repos.nodes.create({
      id,
      operatorId: owner.id,
      name: `bench-${i}`,
      region: REGIONS[i % REGIONS.length]!,
      country: "US",
      hourlyRateCents: 5 + ((i * 37) % 400),
      maxDeployments: 4,
      agentTokenHash: `hash${i}`,
      createdAt: 1_700_000_000_000 + i,
    });
    const gpuCount = i % 3 === 0 ? 0 : 1 + (i % 8);
    const gpu = GPUS[i % GPUS.length]!;
    const cores = [4, 8, 16, 32, 64][i % 5]!;
    await deps.repos.nodes.updateInventory(
      id,
      {
        cpuModel: "AMD EPYC",
        cpuCores: cores,
        cpuThreads: cores * 2,
        ramMb: cores * 4096,
        diskGb: 1000,
        diskType: "NVMe",
        networkSpeedMbps: 1000,
        os: "Ubuntu 22.04",
        containerVersion: "27.0.3",
      },
      Array.from({ length: gpuCount }, () => ({
        ...gpu,
        computeVersion: "8.9",
        brand: "NVIDIA",
        computeCores: 16384,
        tensorCores: 512,
        driverVersion: "550.54.15",
      })),
    );
    if (i % 4 !== 0) await deps.repos.nodes.markOnline(id, o.onlineAtMs ?? 1_700_000_100_000);
  }
}

/**
 * Thirty days of uptime, every clock hour, for the `newest` nodes: the hours
 * a page of the catalogue sums (every page the nodes-list bench reads is among
 * the newest 400 nodes). Written in one statement through the driver itself:
 * 721,000 rows through the repositories would take minutes.
 */
export async function seedUptimeHistory(databaseUrl: string, o: { newest: number; nowMs: number }): Promise<void> {
  const now = Math.floor(o.nowMs / 3_600_000);
  const statement = `with recursive g(hr) as (select ${now - 720} union all select hr + 1 from g where hr < ${now})
    insert into node_uptime_hours (node_id, hour, online_ms)
    select n.id, g.hr, 3600000 - (g.hr % 7) * 60000 from g
    cross join (select id from nodes order by created_at desc limit ${o.newest}) n`;
  if (databaseUrl.startsWith("file:")) {
    const { default: Database } = await import("better-sqlite3");
    const db = new Database(databaseUrl.slice("file:".length));
    db.exec(statement);
    db.close();
  } else {
    const { default: postgres } = await import("postgres");
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => undefined });
    await sql.unsafe(statement);
    await sql.end();
  }
}

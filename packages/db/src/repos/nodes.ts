import { and, count, desc, eq, gt, gte, inArray, isNull, lte, type SQL, sql } from "drizzle-orm";
import type { DbHandle } from "../client";
import type { EgressPolicy, Gpu, NodeRow, NodeSpecs } from "../types";
import { execRaw } from "./raw";

export type NodeFilter = {
  status?: NodeRow["status"];
  hasGpu?: boolean;
  minGpuVram?: number;
  minFreeGpus?: number;
  minCpuCores?: number;
  minRamMb?: number;
  region?: string;
  maxHourlyRate?: number;
  egressPolicy?: EgressPolicy;
};

/** What a node's agent says of itself beside its inventory; null where it has not said (an older agent). */
export type AgentPolicies = { egressPolicy: EgressPolicy | null; diskDefaultGb: number | null };

export const EMPTY_SPECS: NodeSpecs = {
  cpuModel: "",
  cpuCores: 0,
  cpuThreads: 0,
  ramMb: 0,
  diskGb: 0,
  diskType: "",
  networkSpeedMbps: 0,
  os: "",
  containerVersion: "",
};

export function createNodesRepo(h: DbHandle) {
  const { nodes } = h.t;
  const visible = isNull(nodes.retiredAt);

  function where(f: NodeFilter): SQL | undefined {
    const c: Array<SQL | undefined> = [visible];
    if (f.status) c.push(eq(nodes.status, f.status));
    if (f.hasGpu === true) c.push(gt(nodes.gpuCount, 0));
    if (f.hasGpu === false) c.push(eq(nodes.gpuCount, 0));
    if (f.minGpuVram !== undefined) c.push(gte(nodes.maxGpuVramMb, f.minGpuVram));
    if (f.minFreeGpus !== undefined && f.minFreeGpus > 0) c.push(sql`${nodes.gpuCount} - ${nodes.usedGpus} >= ${f.minFreeGpus}`);
    if (f.minCpuCores !== undefined) c.push(gte(nodes.cpuCores, f.minCpuCores));
    if (f.minRamMb !== undefined) c.push(gte(nodes.ramMb, f.minRamMb));
    if (f.region) c.push(eq(nodes.region, f.region));
    // Rates are whole credits: "at most 1.5" is "at most 1", and the integer column is compared with an integer.
    if (f.maxHourlyRate !== undefined) c.push(lte(nodes.hourlyRateCents, Math.floor(f.maxHourlyRate)));
    if (f.egressPolicy) c.push(eq(nodes.egressPolicy, f.egressPolicy));
    return and(...c);
  }

  return {
    async create(row: {
      id: string;
      operatorId: string;
      name: string;
      region: string;
      country: string;
      hourlyRateCents: number;
      maxDeployments: number;
      agentTokenHash: string;
      createdAt: number;
    }): Promise<NodeRow> {
      return h.run(async (db) => {
        const [created] = await db
          .insert(nodes)
          .values({ ...row, status: "offline", specs: EMPTY_SPECS, gpus: [] })
          .returning();
        return created!;
      });
    },

    /**
     * Creates the node unless its operator already has `maxNodes` that are not
     * retired; answers undefined then. Counted and inserted in one transaction,
     * under a per-operator lock on PostgreSQL (SQLite runs one at a time), so
     * parallel requests cannot pass the quota together.
     */
    async createWithinQuota(row: Parameters<typeof this.create>[0], maxNodes: number): Promise<NodeRow | undefined> {
      return h.transaction(async (db) => {
        if (h.dialect === "pg") await db.execute(sql`select pg_advisory_xact_lock(hashtext(${`node-quota:${row.operatorId}`}))`);
        const [held] = await db
          .select({ n: count() })
          .from(nodes)
          .where(and(eq(nodes.operatorId, row.operatorId), visible));
        if ((held?.n ?? 0) >= maxNodes) return undefined;
        const [created] = await db
          .insert(nodes)
          .values({ ...row, status: "offline", specs: EMPTY_SPECS, gpus: [] })
          .returning();
        return created!;
      });
    },

    /** Newest first: a new operator's node is found without paging to the end. */
    async list(f: NodeFilter, page: number, limit: number): Promise<{ rows: NodeRow[]; total: number }> {
      return h.run(async (db) => {
        const w = where(f);
        const rows = await db
          .select()
          .from(nodes)
          .where(w)
          .orderBy(desc(nodes.createdAt), desc(nodes.id))
          .limit(limit)
          .offset((page - 1) * limit);
        const [c] = await db.select({ n: count() }).from(nodes).where(w);
        return { rows, total: Number(c?.n ?? 0) };
      });
    },

    /** Every online node in service, for placement: it counts each one's reason not to fit, so it reads them all. */
    async online(): Promise<NodeRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(nodes)
          .where(and(eq(nodes.status, "online"), visible)),
      );
    },

    async get(id: string, opts: { includeRetired?: boolean } = {}): Promise<NodeRow | undefined> {
      return h.run(async (db) => {
        const [row] = await db
          .select()
          .from(nodes)
          .where(opts.includeRetired ? eq(nodes.id, id) : and(eq(nodes.id, id), visible));
        return row;
      });
    },

    /** Each node's default disk allowance as its agent said it (null before it has), retired nodes included: their deployments are still shown. */
    async diskDefaults(ids: readonly string[]): Promise<Map<string, number | null>> {
      if (ids.length === 0) return new Map();
      const rows = await h.run((db) =>
        db
          .select({ id: nodes.id, diskDefaultGb: nodes.diskDefaultGb })
          .from(nodes)
          .where(inArray(nodes.id, [...new Set(ids)])),
      );
      return new Map(rows.map((r) => [r.id, r.diskDefaultGb]));
    },

    /** With includeRetired, a retired node's too: its agent is told to drain rather than that its token is wrong. */
    async byAgentTokenHash(hash: string, opts: { includeRetired?: boolean } = {}): Promise<NodeRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(nodes)
              .where(opts.includeRetired ? eq(nodes.agentTokenHash, hash) : and(eq(nodes.agentTokenHash, hash), visible))
          )[0],
      );
    },

    async listByOperator(operatorId: string, opts: { includeRetired?: boolean } = {}): Promise<NodeRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(nodes)
          .where(opts.includeRetired ? eq(nodes.operatorId, operatorId) : and(eq(nodes.operatorId, operatorId), visible))
          .orderBy(desc(nodes.createdAt)),
      );
    },

    async retire(id: string, operatorId: string, nowMs: number): Promise<boolean> {
      return h.run(async (db) => {
        const done = await db
          .update(nodes)
          .set({ retiredAt: nowMs, status: "offline", onlineSince: null })
          .where(and(eq(nodes.id, id), eq(nodes.operatorId, operatorId), visible))
          .returning({ id: nodes.id });
        return done.length === 1;
      });
    },

    /** What the agent's latest specs frame says: each frame says it all again, so what it leaves out goes back to null. */
    async updateInventory(id: string, specs: NodeSpecs, gpus: Gpu[], policies: AgentPolicies = { egressPolicy: null, diskDefaultGb: null }) {
      await h.run((db) =>
        db
          .update(nodes)
          .set({
            specs,
            gpus,
            ...policies,
            gpuCount: gpus.length,
            maxGpuVramMb: gpus.reduce((m, g) => Math.max(m, g.vramMb), 0),
            cpuCores: specs.cpuCores,
            ramMb: specs.ramMb,
          })
          .where(eq(nodes.id, id)),
      );
    },

    /** Online from the first heartbeat; the online time feeds uptimePercent. */
    async markOnline(id: string, nowMs: number) {
      await h.run((db) =>
        db
          .update(nodes)
          .set({ status: "online", lastHeartbeat: nowMs, onlineSince: sql`coalesce(${nodes.onlineSince}, ${nowMs})` })
          .where(and(eq(nodes.id, id), visible)),
      );
    },

    async markOffline(id: string, nowMs: number) {
      await h.run((db) =>
        db
          .update(nodes)
          .set({
            status: sql`case when ${nodes.status} = 'maintenance' then 'maintenance' else 'offline' end`,
            onlineMsTotal: sql`${nodes.onlineMsTotal} + coalesce(${nowMs} - ${nodes.onlineSince}, 0)`,
            onlineSince: null,
          })
          .where(eq(nodes.id, id)),
      );
    },

    /**
     * Many nodes' last heartbeats in one statement per thousand: 10,000 agents
     * would otherwise cost 1,000 UPDATEs a second. Never moves a heartbeat backwards.
     */
    async recordHeartbeats(beats: ReadonlyArray<readonly [nodeId: string, atMs: number]>) {
      for (let i = 0; i < beats.length; i += 1000) {
        const rows = sql.join(
          beats.slice(i, i + 1000).map(([id, ms]) => sql`(${id}, cast(${ms} as bigint))`),
          sql`, `,
        );
        await h.run((db) =>
          execRaw(
            h,
            db,
            sql`with beat(id, ms) as (values ${rows})
            update nodes set last_heartbeat = beat.ms from beat
            where nodes.id = beat.id and (nodes.last_heartbeat is null or nodes.last_heartbeat < beat.ms)`,
          ),
        );
      }
    },

    /** Nodes whose last heartbeat is older than the cutoff but still count as online. */
    async staleOnline(cutoffMs: number): Promise<NodeRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(nodes)
          .where(and(eq(nodes.status, "online"), lte(nodes.lastHeartbeat, cutoffMs))),
      );
    },
  };
}
export type NodesRepo = ReturnType<typeof createNodesRepo>;

/** Share of the node's life it has been online, in percent with one decimal. */
export function uptimePercent(n: Pick<NodeRow, "createdAt" | "onlineMsTotal" | "onlineSince">, nowMs: number): number {
  const life = nowMs - n.createdAt;
  if (life <= 0) return 0;
  const online = n.onlineMsTotal + (n.onlineSince !== null ? nowMs - n.onlineSince : 0);
  return Math.round(Math.min(100, (online / life) * 100) * 10) / 10;
}

import { and, count, desc, eq, gt, gte, inArray, isNotNull, isNull, lt, lte, type SQL, sql } from "drizzle-orm";
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

/** The clock hour a node's uptime is counted in (node_uptime_hours.hour). */
export const UPTIME_HOUR_MS = 3_600_000;
/** A node's figure per uptime window: the ms heard from (repos.nodes.uptime), or a percent (uptimePercents). */
export type UptimeWindows = { last24h: number; last7d: number; last30d: number };
export const UPTIME_WINDOWS_MS: UptimeWindows = { last24h: 24 * UPTIME_HOUR_MS, last7d: 7 * 24 * UPTIME_HOUR_MS, last30d: 30 * 24 * UPTIME_HOUR_MS };
/** Where a window's sum starts: the clock hour it reaches back into, counted whole. */
export const uptimeWindowStartHour = (nowMs: number, windowMs: number) => Math.floor((nowMs - windowMs) / UPTIME_HOUR_MS);
/** Hours of uptime kept beyond the longest window (30 days), so nothing a window reads is ever gone. */
export const UPTIME_KEPT_EXTRA_HOURS = 24;

export function createNodesRepo(h: DbHandle) {
  const { nodes, nodeUptimeHours: up } = h.t;
  const visible = isNull(nodes.retiredAt);
  // The status column says whether its agent is heard from; maintenance is the operator's, kept beside it.
  const presence = (status: "online" | "offline") => and(eq(nodes.status, status), isNull(nodes.maintenanceReason));

  function where(f: NodeFilter): SQL | undefined {
    const c: Array<SQL | undefined> = [visible];
    if (f.status) c.push(f.status === "maintenance" ? isNotNull(nodes.maintenanceReason) : presence(f.status));
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

    /** Every online node in service, those in maintenance included, for placement: it counts each one's reason not to fit, so it reads them all. */
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
          .set({ retiredAt: nowMs, status: "offline" })
          .where(and(eq(nodes.id, id), eq(nodes.operatorId, operatorId), visible))
          .returning({ id: nodes.id });
        return done.length === 1;
      });
    },

    /**
     * What the agent's latest specs frame says: each frame says it all again, so what it leaves out goes back to null.
     * Specs without cores or memory take the node offline: the catalogue never shows such a node online. With
     * `connected` (its agent's session is up) they bring it online in the same write: a node whose agent said hello
     * is online from its first specs.
     */
    async updateInventory(
      id: string,
      specs: NodeSpecs,
      gpus: Gpu[],
      policies: AgentPolicies = { egressPolicy: null, diskDefaultGb: null },
      o: { connected?: boolean } = {},
    ) {
      const status = !hasSpecs(specs) ? ("offline" as const) : o.connected ? ("online" as const) : undefined;
      await h.run((db) =>
        db
          .update(nodes)
          .set({
            ...(status ? { status } : {}),
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

    /**
     * Its agent is heard from (a hello, or a specs report while connected): online, but only once its specs are known,
     * so a node whose first specs have not come yet is never shown online with no cores or memory. The time before
     * this is not uptime: the next heartbeat counts from here. `agentVersion`: what a hello said (the operator's node
     * list shows it).
     */
    async markOnline(id: string, nowMs: number, agentVersion?: string) {
      await h.run((db) =>
        db
          .update(nodes)
          .set({
            status: sql`case when ${nodes.cpuCores} > 0 and ${nodes.ramMb} > 0 then 'online' else ${nodes.status} end`,
            lastHeartbeat: nowMs,
            ...(agentVersion === undefined ? {} : { agentVersion }),
          })
          .where(and(eq(nodes.id, id), visible)),
      );
    },

    /** The operator's changes to their node; undefined when it is not theirs (or retired). */
    async update(
      id: string,
      operatorId: string,
      patch: Partial<Pick<NodeRow, "name" | "region" | "country" | "hourlyRateCents" | "maxDeployments">>,
    ): Promise<NodeRow | undefined> {
      return h.run(async (db) => {
        const mine = and(eq(nodes.id, id), eq(nodes.operatorId, operatorId), visible);
        if (Object.keys(patch).length === 0) return (await db.select().from(nodes).where(mine))[0];
        return (await db.update(nodes).set(patch).where(mine).returning())[0];
      });
    },

    /** Puts the node in maintenance with `reason` (since now, unless it already was), or takes it out with null. */
    async setMaintenance(id: string, operatorId: string, reason: string | null, nowMs: number): Promise<NodeRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .update(nodes)
              .set({
                maintenanceReason: reason,
                maintenanceSince: reason === null ? null : sql`coalesce(${nodes.maintenanceSince}, ${nowMs})`,
              })
              .where(and(eq(nodes.id, id), eq(nodes.operatorId, operatorId), visible))
              .returning()
          )[0],
      );
    },

    /** Its agent is not heard from. What it was online for is counted as its heartbeats come (node_uptime_hours), not here. */
    async markOffline(id: string) {
      await h.run((db) => db.update(nodes).set({ status: "offline" }).where(eq(nodes.id, id)));
    },

    /**
     * Many nodes' last heartbeats in one statement per thousand: 10,000 agents
     * would otherwise cost 1,000 UPDATEs a second. Never moves a heartbeat backwards.
     * Before it, one upsert per thousand adds each beat's gap since the node's last
     * heartbeat, at most `maxGapMs` (a longer silence was not uptime), to the clock
     * hours it spans (two at most while maxGapMs is under an hour): what uptime is summed from.
     */
    async recordHeartbeats(beats: ReadonlyArray<readonly [nodeId: string, atMs: number]>, maxGapMs: number) {
      // Constants written into the statement: PostgreSQL types an untyped parameter in a CASE poorly.
      const cap = sql.raw(String(Math.max(0, Math.floor(maxGapMs))));
      const hourMs = sql.raw(String(UPTIME_HOUR_MS));
      const gap = sql`case when beat.ms - nodes.last_heartbeat > ${cap} then ${cap} else beat.ms - nodes.last_heartbeat end`;
      const inHour = sql`beat.ms % ${hourMs}`;
      const thisHour = sql`case when ${gap} < ${inHour} then ${gap} else ${inHour} end`;
      for (let i = 0; i < beats.length; i += 1000) {
        const rows = sql.join(
          beats.slice(i, i + 1000).map(([id, ms]) => sql`(${id}, cast(${ms} as bigint))`),
          sql`, `,
        );
        await h.transaction(async (db) => {
          await execRaw(
            h,
            db,
            sql`with beat(id, ms) as (values ${rows}),
            span(node_id, hour, ms) as (
              select nodes.id, beat.ms / ${hourMs}, ${thisHour} from beat join nodes on nodes.id = beat.id
              where nodes.last_heartbeat < beat.ms
              union all
              select nodes.id, beat.ms / ${hourMs} - 1, ${gap} - ${thisHour} from beat join nodes on nodes.id = beat.id
              where nodes.last_heartbeat < beat.ms and ${gap} > ${inHour}
            )
            insert into node_uptime_hours (node_id, hour, online_ms)
            select node_id, hour, ms from span where ms > 0
            on conflict (node_id, hour) do update set online_ms = node_uptime_hours.online_ms + excluded.online_ms`,
          );
          await execRaw(
            h,
            db,
            sql`with beat(id, ms) as (values ${rows})
            update nodes set last_heartbeat = beat.ms from beat
            where nodes.id = beat.id and (nodes.last_heartbeat is null or nodes.last_heartbeat < beat.ms)`,
          );
        });
      }
    },

    /**
     * Forgets the uptime hours no window reads any more (older than 30 days and a day): 24 rows a node a day
     * would otherwise pile up for good. One index range per node, (node_id, hour), not a scan of the table.
     */
    async pruneUptime(nowMs: number): Promise<number> {
      const before = uptimeWindowStartHour(nowMs, UPTIME_WINDOWS_MS.last30d) - UPTIME_KEPT_EXTRA_HOURS;
      return h.run((db) => execRaw(h, db, sql`delete from node_uptime_hours where node_id in (select id from nodes) and hour < ${before}`));
    },

    /**
     * Each node's ms heard from over the last 24 h, 7 d and 30 d (from the clock hour each reaches back into); none for a
     * node never heard. `hours` narrows every window to the clock hours from `fromHour` and before `beforeHour`.
     */
    async uptime(ids: readonly string[], nowMs: number, hours: { fromHour?: number; beforeHour?: number } = {}): Promise<Map<string, UptimeWindows>> {
      if (ids.length === 0) return new Map();
      const from = (w: keyof UptimeWindows) => Math.max(uptimeWindowStartHour(nowMs, UPTIME_WINDOWS_MS[w]), hours.fromHour ?? Number.MIN_SAFE_INTEGER);
      const within = (w: keyof UptimeWindows) => sql<string>`coalesce(sum(case when ${up.hour} >= ${from(w)} then ${up.onlineMs} else 0 end), 0)`;
      const rows = await h.run((db) =>
        db
          .select({ id: up.nodeId, last24h: within("last24h"), last7d: within("last7d"), last30d: within("last30d") })
          .from(up)
          .where(
            and(
              inArray(up.nodeId, [...new Set(ids)]),
              gte(up.hour, from("last30d")),
              hours.beforeHour === undefined ? undefined : lt(up.hour, hours.beforeHour),
            ),
          )
          .groupBy(up.nodeId),
      );
      return new Map(rows.map((r) => [r.id, { last24h: Number(r.last24h), last7d: Number(r.last7d), last30d: Number(r.last30d) }]));
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

const hasSpecs = (s: Pick<NodeSpecs, "cpuCores" | "ramMb">) => s.cpuCores > 0 && s.ramMb > 0;

/**
 * Uptime in percent with one decimal, per window: the ms heard from (repos.nodes.uptime) over
 * the window's length, which starts at the clock hour it reaches back into, or at the node's
 * creation for a node younger than that.
 */
export function uptimePercents(createdAtMs: number, heardMs: UptimeWindows | undefined, nowMs: number): UptimeWindows {
  const percent = (w: keyof UptimeWindows) => {
    const life = nowMs - Math.max(createdAtMs, uptimeWindowStartHour(nowMs, UPTIME_WINDOWS_MS[w]) * UPTIME_HOUR_MS);
    if (life <= 0 || !heardMs) return 0;
    return Math.round(Math.min(100, (heardMs[w] / life) * 100) * 10) / 10;
  };
  return { last24h: percent("last24h"), last7d: percent("last7d"), last30d: percent("last30d") };
}

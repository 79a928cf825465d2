import { type DeploymentStatus, HOST_RAM_RESERVE_DIVISOR, LIVE_STATUSES, MILLICORES_PER_CORE, usableRamMb } from "@cm/protocol";
import { type AnyColumn, and, count, desc, eq, gt, inArray, isNull, lt, lte, type SQL, sql } from "drizzle-orm";
import type { Db, DbHandle } from "../client";
import type { DeploymentRow, NodeRow } from "../types";
import { ledgerOps } from "./ledger";

export type OccupyRefusal =
  | "NODE_OFFLINE"
  | "NODE_IN_MAINTENANCE"
  | "NODE_AT_CAPACITY"
  | "NODE_INSUFFICIENT_FREE_GPUS"
  | "NODE_INSUFFICIENT_FREE_CPU"
  | "NODE_INSUFFICIENT_FREE_RAM"
  | "NODE_INSUFFICIENT_FREE_DISK"
  | "INSUFFICIENT_CREDITS";
/** What a live deployment holds of its node besides its slot. */
export type NodeHolding = Pick<DeploymentRow, "nodeId" | "userId" | "gpuCount" | "cpuMillicores" | "memoryMb" | "diskGb">;
/** What the node had free when it refused, for the refusal's details: freeGpus, freeCpuCores, freeMemoryMb, freeDiskGb. */
export type NodeFree = { freeGpus: number; freeCpuCores: number; freeMemoryMb: number; freeDiskGb: number };
export type NewDeployment = Omit<
  DeploymentRow,
  | "totalCostMicro"
  | "reservedMicro"
  | "billedUntil"
  | "billedMs"
  | "removedFromNodeAt"
  | "runSeq"
  | "startedAt"
  | "stoppedAt"
  | "deletedAt"
  | "statusReason"
  | "exitCode"
  | "restartCount"
  | "endpoints"
  | "desiredState"
  | "status"
  | "updatedAt"
>;
/** What a move may write besides the status, as its caller decides. */
export type TransitionPatch = Partial<
  Pick<DeploymentRow, "statusReason" | "exitCode" | "startedAt" | "stoppedAt" | "endpoints" | "billedUntil" | "desiredState" | "deletedAt" | "restartCount">
>;
/** A move's fields with the bookkeeping the move settles (the hold, the run). */
export type MoveFields = TransitionPatch & Partial<Pick<DeploymentRow, "reservedMicro" | "runSeq">>;

/** Thrown inside a transaction to roll it back; turned into a result outside it. */
/** What of the node no live deployment holds (never below 0: an inventory may shrink under its deployments). */
export function nodeFree(
  n: Pick<NodeRow, "gpuCount" | "usedGpus" | "cpuCores" | "usedCpuMillicores" | "ramMb" | "usedMemoryMb" | "specs" | "usedDiskGb">,
): NodeFree {
  return {
    freeGpus: Math.max(0, n.gpuCount - n.usedGpus),
    freeCpuCores: Math.max(0, n.cpuCores * MILLICORES_PER_CORE - n.usedCpuMillicores) / MILLICORES_PER_CORE,
    freeMemoryMb: Math.max(0, usableRamMb(n.ramMb) - n.usedMemoryMb),
    freeDiskGb: Math.max(0, (n.specs.diskGb ?? 0) - n.usedDiskGb),
  };
}

/** The deployment's disk allowance as its node counts it: none while unknown (a custom image on a node whose agent never said its default). */
export const heldDiskGb = (d: Pick<DeploymentRow, "diskGb">) => d.diskGb ?? 0;

export class OccupyRefused extends Error {
  constructor(
    readonly reason: OccupyRefusal,
    readonly free?: NodeFree,
  ) {
    super(reason);
  }
}

export function createDeploymentsRepo(h: DbHandle) {
  const { deployments, nodes, deploymentLogs: logs } = h.t;
  const ledger = ledgerOps(h);
  const notDeleted = isNull(deployments.deletedAt);
  // The node's disk is in its specs only (the agent's figure, as it last said): read from the JSON in the UPDATE itself.
  const nodeDiskGb = h.dialect === "pg" ? sql`coalesce((${nodes.specs}->>'diskGb')::integer, 0)` : sql`coalesce(json_extract(${nodes.specs}, '$.diskGb'), 0)`;

  /** One page of the deployments `where` selects, newest first, and how many it selects in all. */
  const onePage = (where: SQL | undefined, page: number, limit: number) =>
    h.run(async (db) => {
      const rows = await db
        .select()
        .from(deployments)
        .where(where)
        .orderBy(desc(deployments.createdAt), desc(deployments.id))
        .limit(limit)
        .offset((page - 1) * limit);
      const [c] = await db.select({ n: count() }).from(deployments).where(where);
      return { rows, total: Number(c?.n ?? 0) };
    });

  /**
   * Takes a slot on the node with the deployment's GPUs, CPU, memory and disk, and
   * holds an hour of credits, or refuses (and the caller's transaction rolls
   * back). One conditional UPDATE checks and takes: it locks the node's row on
   * PostgreSQL (a second waits, then checks the row as the first left it), and
   * SQLite runs one writer at a time, so parallel creates never take the same
   * GPU or the same core twice.
   */
  async function occupy(db: Db, d: NodeHolding, reserveMicro: number) {
    // A deployment holding none of a resource fits whatever the node has left of it (an inventory that shrank included).
    const fits: SQL[] = [lt(nodes.activeDeployments, nodes.maxDeployments)];
    if (d.gpuCount > 0) fits.push(sql`${nodes.usedGpus} + ${d.gpuCount} <= ${nodes.gpuCount}`);
    if (d.cpuMillicores > 0) fits.push(sql`${nodes.usedCpuMillicores} + ${d.cpuMillicores} <= ${nodes.cpuCores} * ${MILLICORES_PER_CORE}`);
    // usableRamMb in SQL: a tenth of the RAM (integer division on both databases) stays for the host.
    if (d.memoryMb > 0) fits.push(sql`${nodes.usedMemoryMb} + ${d.memoryMb} <= ${nodes.ramMb} - ${nodes.ramMb} / ${sql.raw(String(HOST_RAM_RESERVE_DIVISOR))}`);
    // A node that has not said its disk's size (0) is not counted against, as one that has not said its cores.
    const diskGb = heldDiskGb(d);
    if (diskGb > 0) fits.push(sql`(${nodeDiskGb} = 0 or ${nodes.usedDiskGb} + ${diskGb} <= ${nodeDiskGb})`);
    const slot = await db
      .update(nodes)
      .set({
        activeDeployments: sql`${nodes.activeDeployments} + 1`,
        usedGpus: sql`${nodes.usedGpus} + ${d.gpuCount}`,
        usedCpuMillicores: sql`${nodes.usedCpuMillicores} + ${d.cpuMillicores}`,
        usedMemoryMb: sql`${nodes.usedMemoryMb} + ${d.memoryMb}`,
        usedDiskGb: sql`${nodes.usedDiskGb} + ${diskGb}`,
      })
      .where(and(eq(nodes.id, d.nodeId), eq(nodes.status, "online"), isNull(nodes.retiredAt), isNull(nodes.maintenanceReason), ...fits))
      .returning({ id: nodes.id });
    if (slot.length === 0) {
      const [n] = await db.select().from(nodes).where(eq(nodes.id, d.nodeId));
      if (n?.status !== "online" || n.retiredAt !== null) throw new OccupyRefused("NODE_OFFLINE");
      if (n.maintenanceReason !== null) throw new OccupyRefused("NODE_IN_MAINTENANCE");
      const free = nodeFree(n);
      if (n.activeDeployments >= n.maxDeployments) throw new OccupyRefused("NODE_AT_CAPACITY", free);
      if (d.gpuCount > 0 && n.usedGpus + d.gpuCount > n.gpuCount) throw new OccupyRefused("NODE_INSUFFICIENT_FREE_GPUS", free);
      if (d.cpuMillicores > 0 && n.usedCpuMillicores + d.cpuMillicores > n.cpuCores * MILLICORES_PER_CORE)
        throw new OccupyRefused("NODE_INSUFFICIENT_FREE_CPU", free);
      if (d.memoryMb > 0 && n.usedMemoryMb + d.memoryMb > usableRamMb(n.ramMb)) throw new OccupyRefused("NODE_INSUFFICIENT_FREE_RAM", free);
      throw new OccupyRefused("NODE_INSUFFICIENT_FREE_DISK", free);
    }
    if (!(await ledger.reserve(db, d.userId, reserveMicro))) throw new OccupyRefused("INSUFFICIENT_CREDITS");
  }

  /** `used` less `n`, never below 0: a counter off by a lost update must not go negative and block nothing. */
  const less = (used: AnyColumn, n: number) => sql`case when ${used} > ${n} then ${used} - ${n} else 0 end`;

  return {
    /*
     * The parts of a move, each inside the caller's transaction; which of them a
     * move takes is decided in one place, the control plane's deployment-moves.
     */
    occupy,

    /** Writes a move: from exactly the status and version `dep` was read in. Null when someone else moved it first. */
    async moveRow(db: Db, dep: DeploymentRow, to: DeploymentStatus, fields: MoveFields, nowMs: number): Promise<DeploymentRow | null> {
      const [row] = await db
        .update(deployments)
        .set({ ...fields, status: to, updatedAt: nowMs })
        .where(and(eq(deployments.id, dep.id), eq(deployments.status, dep.status), eq(deployments.updatedAt, dep.updatedAt)))
        .returning();
      return row ?? null;
    },

    /** Gives back the deployment's slot on its node, its GPUs, CPU, memory and disk, and what is still held for it. */
    async vacate(db: Db, dep: DeploymentRow) {
      await db
        .update(nodes)
        .set({
          activeDeployments: less(nodes.activeDeployments, 1),
          usedGpus: less(nodes.usedGpus, dep.gpuCount),
          usedCpuMillicores: less(nodes.usedCpuMillicores, dep.cpuMillicores),
          usedMemoryMb: less(nodes.usedMemoryMb, dep.memoryMb),
          usedDiskGb: less(nodes.usedDiskGb, heldDiskGb(dep)),
        })
        .where(eq(nodes.id, dep.nodeId));
      await ledger.release(db, dep.userId, dep.reservedMicro);
    },

    async create(d: NewDeployment, reserveMicro: number, nowMs: number): Promise<DeploymentRow | { refused: OccupyRefusal; free?: NodeFree | undefined }> {
      try {
        return await h.transaction(async (db) => {
          await occupy(db, d, reserveMicro);
          const [row] = await db
            .insert(deployments)
            .values({ ...d, status: "pending", desiredState: "running", endpoints: [], reservedMicro: reserveMicro, updatedAt: nowMs })
            .returning();
          return row!;
        });
      } catch (err) {
        if (err instanceof OccupyRefused) return { refused: err.reason, free: err.free };
        throw err;
      }
    },

    async get(id: string, userId?: string): Promise<DeploymentRow | undefined> {
      return h.run(async (db) => {
        const [row] = await db
          .select()
          .from(deployments)
          .where(and(eq(deployments.id, id), notDeleted, userId ? eq(deployments.userId, userId) : undefined));
        return row;
      });
    },

    /** One page of the tenant's deployments, newest first, deleted ones excluded. */
    async list({ userId, status, page, limit }: { userId: string; status?: DeploymentStatus | undefined; page: number; limit: number }) {
      return onePage(and(eq(deployments.userId, userId), notDeleted, status ? eq(deployments.status, status) : undefined), page, limit);
    },

    /** One page of what is on the node (its agent has not confirmed it removed), newest first: what its operator is shown. */
    async listOnNode({ nodeId, status, page, limit }: { nodeId: string; status?: DeploymentStatus | undefined; page: number; limit: number }) {
      return onePage(
        and(eq(deployments.nodeId, nodeId), isNull(deployments.removedFromNodeAt), status ? eq(deployments.status, status) : undefined),
        page,
        limit,
      );
    },

    /** What a node should converge to: all its deployments except the deleted ones its agent confirmed gone. */
    async desiredForNode(nodeId: string): Promise<DeploymentRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(deployments)
          .where(and(eq(deployments.nodeId, nodeId), isNull(deployments.removedFromNodeAt)))
          .orderBy(deployments.createdAt, deployments.id),
      );
    },

    /** Rows by id, deleted ones included: what another replica changed (its wake-up names ids only). */
    async byIds(ids: readonly string[]): Promise<DeploymentRow[]> {
      if (ids.length === 0) return [];
      return h.run((db) =>
        db
          .select()
          .from(deployments)
          .where(inArray(deployments.id, [...ids])),
      );
    },

    /**
     * The streams' fallback read, one statement for every deployment a replica's
     * streams watch: each row as it is now (deleted ones included), and how many
     * of its log lines were stored after line id `afterLogId` and after
     * `newerThanLogId` (ids are the store's insertion order, so a line stored late
     * under a lower line number still counts), with the store's newest line id.
     * The lines counted are the ones stored since those ids, found by the primary
     * key: the read costs what was stored meanwhile, not what the logs hold.
     */
    async watched(
      ids: readonly string[],
      afterLogId: number,
      newerThanLogId: number,
    ): Promise<{ rows: Array<{ row: DeploymentRow; stored: number; storedNewer: number }>; newestLogId: number | undefined }> {
      if (ids.length === 0) return { rows: [], newestLogId: undefined };
      const rows = await h.run((db) => {
        const stored = db
          .select({
            deploymentId: logs.deploymentId,
            n: sql<number>`count(*)`.as("n"),
            newer: sql<number>`sum(case when ${logs.id} > ${newerThanLogId} then 1 else 0 end)`.as("newer"),
          })
          .from(logs)
          .where(and(gt(logs.id, afterLogId), inArray(logs.deploymentId, [...ids])))
          .groupBy(logs.deploymentId)
          .as("stored");
        return db
          .select({
            row: deployments,
            stored: sql<number>`coalesce(${stored.n}, 0)`.mapWith(Number),
            storedNewer: sql<number>`coalesce(${stored.newer}, 0)`.mapWith(Number),
            newestLogId: sql<number | null>`(select max(${sql.identifier("id")}) from ${sql.identifier("deployment_logs")})`.mapWith(Number),
          })
          .from(deployments)
          .leftJoin(stored, eq(stored.deploymentId, deployments.id))
          .where(inArray(deployments.id, [...ids]));
      });
      return {
        rows: rows.map((r) => ({ row: r.row, stored: r.stored, storedNewer: r.storedNewer })),
        // No row found: nothing to say of the store (the watched were purged); no line at all: 0.
        newestLogId: rows.length === 0 ? undefined : (rows[0]!.newestLogId ?? 0),
      };
    },

    /**
     * What was last moved in (fromMs, toMs] and is still on its node: the
     * replicas' sweep for a wake-up that was lost (updatedAt is every move's
     * compare-and-set version, stamped by whichever replica moved it).
     */
    async movedBetween(fromMs: number, toMs: number): Promise<DeploymentRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(deployments)
          .where(and(gt(deployments.updatedAt, fromMs), lte(deployments.updatedAt, toMs), isNull(deployments.removedFromNodeAt))),
      );
    },

    /** One of the node's deployments, deleted or not: its agent reports on it until it is gone from the node. */
    async getOnNode(id: string, nodeId: string): Promise<DeploymentRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(deployments)
              .where(and(eq(deployments.id, id), eq(deployments.nodeId, nodeId)))
          )[0],
      );
    },

    async liveOnNode(nodeId: string): Promise<DeploymentRow[]> {
      return h.run((db) =>
        db
          .select()
          .from(deployments)
          .where(and(eq(deployments.nodeId, nodeId), inArray(deployments.status, [...LIVE_STATUSES]))),
      );
    },

    async runningIds(): Promise<Array<{ id: string; nodeId: string }>> {
      return h.run((db) => db.select({ id: deployments.id, nodeId: deployments.nodeId }).from(deployments).where(eq(deployments.status, "running")));
    },

    /** The agent confirmed a deleted deployment gone: it leaves the node's desired state for good. */
    async markRemovedFromNode(id: string, nodeId: string, nowMs: number): Promise<boolean> {
      return h.run(async (db) => {
        const done = await db
          .update(deployments)
          .set({ removedFromNodeAt: nowMs })
          .where(and(eq(deployments.id, id), eq(deployments.nodeId, nodeId), eq(deployments.desiredState, "removed"), isNull(deployments.removedFromNodeAt)))
          .returning({ id: deployments.id });
        return done.length === 1;
      });
    },

    /** Progress text while an image is pulled; leaves updatedAt alone, so it never races a transition. */
    /** What the tenant reads of the node's live deployments that it still wants running (its node unreachable, say); their status stays. */
    async noteOnNode(nodeId: string, reason: string): Promise<string[]> {
      const rows = await h.run((db) =>
        db
          .update(deployments)
          .set({ statusReason: reason })
          .where(and(eq(deployments.nodeId, nodeId), inArray(deployments.status, [...LIVE_STATUSES]), eq(deployments.desiredState, "running")))
          .returning({ id: deployments.id }),
      );
      return rows.map((r) => r.id);
    },

    /** Nodes offline since before `cutoffMs` (their last heartbeat) that still have live deployments: lost once silent that long. */
    async silentNodesWithLive(cutoffMs: number): Promise<Array<{ nodeId: string; lastHeartbeat: number }>> {
      const rows = await h.run((db) =>
        db
          .selectDistinct({ nodeId: deployments.nodeId, lastHeartbeat: nodes.lastHeartbeat })
          .from(deployments)
          .innerJoin(nodes, eq(nodes.id, deployments.nodeId))
          .where(and(inArray(deployments.status, [...LIVE_STATUSES]), eq(nodes.status, "offline"), lt(nodes.lastHeartbeat, cutoffMs))),
      );
      return rows.map((r) => ({ nodeId: r.nodeId, lastHeartbeat: r.lastHeartbeat ?? 0 }));
    },

    async notePulling(id: string, nodeId: string, reason: string) {
      await h.run((db) =>
        db
          .update(deployments)
          .set({ statusReason: reason })
          .where(and(eq(deployments.id, id), eq(deployments.nodeId, nodeId), eq(deployments.status, "pulling"))),
      );
    },

    /** The deployment behind a public endpoint host, deleted ones excluded. */
    async byEndpointKey(key: string): Promise<DeploymentRow | undefined> {
      return h.run(
        async (db) =>
          (
            await db
              .select()
              .from(deployments)
              .where(and(eq(deployments.endpointKey, key), notDeleted))
          )[0],
      );
    },

    /** Records which exposed ports answer, as the node's agent last probed them. */
    async setEndpointReadiness(id: string, nodeId: string, ready: Array<{ port: number; ready: boolean }>) {
      await h.run((db) =>
        db
          .update(deployments)
          .set({ endpoints: ready.map((r) => ({ internalPort: r.port, ready: r.ready })) })
          .where(and(eq(deployments.id, id), eq(deployments.nodeId, nodeId))),
      );
    },

    /** Ports learned from the image when the tenant named none (a custom image's EXPOSE). */
    async setPortsIfEmpty(id: string, nodeId: string, ports: number[]) {
      const rows = await h.run((db) =>
        db
          .select({ ports: deployments.ports })
          .from(deployments)
          .where(and(eq(deployments.id, id), eq(deployments.nodeId, nodeId))),
      );
      if (rows[0] && rows[0].ports.length === 0 && ports.length > 0) {
        await h.run((db) => db.update(deployments).set({ ports }).where(eq(deployments.id, id)));
      }
    },
  };
}
export type DeploymentsRepo = ReturnType<typeof createDeploymentsRepo>;

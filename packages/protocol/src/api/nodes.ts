import { z } from "zod";
import { AGENT_UPDATE_LEVELS } from "../agent-versions";
import { NODE_STATUSES, REGIONS } from "../lists";
import { INT32_MAX, labelText, nameText, Pagination, pageQuery, queryBoolean, queryInteger, queryNumber, Timestamp } from "./common";

export { NODE_STATUSES, REGIONS };
export const Region = z.enum(REGIONS);
export const NodeStatus = z.enum(NODE_STATUSES);

/** Whether a node's firewall keeps tenants' containers off its host and networks, as its agent reports it. */
export const EGRESS_POLICIES = ["enforced", "off"] as const;
export const EgressPolicy = z.enum(EGRESS_POLICIES);
export type EgressPolicy = z.infer<typeof EgressPolicy>;

/*
 * Every field an agent reports is bounded: a node's agent is anyone who enrolled
 * a machine, and what it sends is stored and served to every visitor of the
 * catalogue. Ceilings are far above any real machine (a 64 TiB, 65,536-thread
 * host; a GPU with 10 TB of memory), so only a lie or a fault breaks them.
 */
const count = (max: number) => z.number().int().min(0).max(max);

export const NodeSpecs = z.object({
  cpuModel: labelText(256),
  cpuCores: count(65_536),
  cpuThreads: count(65_536),
  ramMb: count(64 * 1024 * 1024),
  diskGb: count(10_000_000),
  diskType: labelText(32),
  networkSpeedMbps: count(10_000_000),
  os: labelText(256),
  containerVersion: labelText(64),
});
export type NodeSpecs = z.infer<typeof NodeSpecs>;

export const Gpu = z.object({
  name: labelText(256),
  vramMb: count(10_000_000),
  computeVersion: labelText(16),
  brand: labelText(64),
  computeCores: count(10_000_000),
  tensorCores: count(10_000_000),
  driverVersion: labelText(64),
});

/** The most GPUs one node reports: more than any server chassis holds. */
export const MAX_GPUS_PER_NODE = 64;
export type Gpu = z.infer<typeof Gpu>;

const summarySpecs = NodeSpecs.pick({ cpuModel: true, cpuCores: true, cpuThreads: true, ramMb: true, diskGb: true, diskType: true });
const summaryGpu = Gpu.pick({ name: true, vramMb: true, computeVersion: true });

export const NodeSummary = z
  .object({
    id: z.string(),
    name: z.string(),
    status: NodeStatus,
    specs: summarySpecs,
    gpus: z.array(summaryGpu),
    region: Region,
    country: z.string(),
    hourlyRateCents: z.number().meta({
      description:
        "credits (US cents) per GPU-hour: a deployment of n GPUs is charged n times this an hour, a CPU-only deployment (gpuCount 0) once; fixed for each deployment when it is created",
    }),
    activeDeployments: z.number().int(),
    maxDeployments: z.number().int(),
    freeGpus: z.number().int().meta({ description: "GPUs no live deployment holds: the most gpuCount a new deployment here can ask for now" }),
    freeCpuCores: z.number().meta({ description: "CPU cores (specs.cpuCores) no live deployment holds" }),
    freeMemoryMb: z.number().int().meta({
      description: "MB of memory no live deployment holds, of the nine tenths of specs.ramMb that deployments may hold (a tenth stays for the host)",
    }),
    freeDiskGb: z.number().int().meta({
      description:
        "GB of the node's disk (specs.diskGb) no live deployment's disk allowance holds: the most diskGb a new deployment here can have now (0 while the node has not said its disk's size, which is then not counted)",
    }),
    uptimePercent: z.number().meta({
      description:
        "share of the last 30 days (of its life so far, for a younger node) its agent was heard from, in percent with one decimal: each heartbeat adds the time since the one before, at most the 3 heartbeat intervals after which a silent node is offline, to its clock hour; the window starts at the clock hour 30 days back. Time in maintenance counts while heartbeats come",
    }),
    maintenanceReason: z.string().nullable().meta({
      description: "why its operator put the node in maintenance (status maintenance: it takes no new deployments, running ones go on); null otherwise",
    }),
    egressPolicy: EgressPolicy.nullable().meta({
      description:
        "enforced: the node's firewall lets a deployment's container reach the internet and DNS only, not the node's host, its local network, cloud metadata or other deployments. off: the operator turned that firewall off, so containers on this node can reach the host and the network it is on. null: the node's agent has not said (never connected, or older than the policy).",
    }),
  })
  .meta({ id: "NodeSummary" });
export type NodeSummary = z.infer<typeof NodeSummary>;

export const NodeDetail = NodeSummary.extend({
  operatorId: z.string(),
  specs: NodeSpecs,
  gpus: z.array(Gpu),
  lastHeartbeat: Timestamp.nullable().meta({ description: "null until the agent first connects" }),
  maintenanceSince: Timestamp.nullable().meta({ description: "when its operator put it in maintenance; null when it is not" }),
  uptime: z
    .object({ last24h: z.number(), last7d: z.number(), last30d: z.number() })
    .meta({ description: "uptimePercent over the last 24 hours, 7 days and 30 days (last30d is uptimePercent), each counted as uptimePercent says" }),
}).meta({ id: "NodeDetail" });
export type NodeDetail = z.infer<typeof NodeDetail>;

export const NodeListQuery = z.strictObject({
  status: NodeStatus.optional().meta({
    description:
      "online: its agent is connected, its specs known, and not in maintenance; maintenance: its operator paused it (whatever its agent); offline: the rest",
  }),
  hasGpu: queryBoolean.optional(),
  // Bounded by the integer columns they are compared with (2^31 - 1), so both databases answer alike.
  minGpuVram: queryInteger(z.number().int().min(0).max(INT32_MAX)).optional(),
  minFreeGpus: queryInteger(z.number().int().min(0).max(MAX_GPUS_PER_NODE))
    .optional()
    .meta({ description: "only nodes with at least this many GPUs no live deployment holds (freeGpus)" }),
  minCpuCores: queryInteger(z.number().int().min(0).max(INT32_MAX)).optional(),
  minRamMb: queryInteger(z.number().int().min(0).max(INT32_MAX)).optional(),
  region: Region.optional(),
  maxHourlyRate: queryNumber(z.number().min(0).max(INT32_MAX))
    .optional()
    .meta({ description: "credits per GPU-hour (hourlyRateCents); a fraction is allowed (1.5 finds nodes at 1 or less)" }),
  egressPolicy: EgressPolicy.optional().meta({
    description: "only nodes whose agent said this policy (enforced: those that keep containers off the operator's network)",
  }),
  ...pageQuery(100),
});
export type NodeListQuery = z.infer<typeof NodeListQuery>;
export const NodeListResponse = z.object({ nodes: z.array(NodeSummary), pagination: Pagination });
export const NodeResponse = z.object({ node: NodeDetail });

export const CreateNodeRequest = z.strictObject({
  name: nameText(100),
  region: Region,
  country: z.string().regex(/^[A-Z]{2}$/, "an ISO 3166-1 alpha-2 country code such as US or DE"),
  hourlyRateCents: z
    .number()
    .int()
    .min(0)
    .max(1_000_000)
    .meta({ description: "credits (US cents) per GPU-hour; a CPU-only deployment pays it once an hour, a deployment of n GPUs n times" }),
  maxDeployments: z.number().int().min(1).max(256),
});
export const CreateNodeResponse = z.object({
  node: NodeDetail,
  agentToken: z.string().meta({ description: "Shown once: the agent authenticates with it. Stored hashed." }),
});
/** `all=true` lists retired nodes too (their retiredAt set), for their operator's records. */
export const OperatorNodeListQuery = z.strictObject({ all: queryBoolean.optional() });
export const OperatorNode = NodeDetail.extend({
  retiredAt: Timestamp.nullable().meta({ description: "when its operator retired it; null while it is in service" }),
  agentVersion: z.string().nullable().meta({ description: "the version its agent said at its last connection; null until an agent has connected" }),
  agentUpdate: z.enum(AGENT_UPDATE_LEVELS).nullable().meta({
    description:
      "whether to upgrade that agent: none; recommended (older than the release this control plane recommends); required (older than the oldest it supports, or no version at all). null while agentVersion is",
  }),
}).meta({ id: "OperatorNode" });
export type OperatorNode = z.infer<typeof OperatorNode>;
export const OperatorNodeListResponse = z.object({ nodes: z.array(OperatorNode) });

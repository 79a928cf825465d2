import { z } from "zod";
import { Pagination, Timestamp, pageQuery, queryBoolean } from "./common";

export const REGIONS = ["us-east", "us-west", "eu-west", "eu-central", "asia-east", "asia-south"] as const;
export const Region = z.enum(REGIONS);
export const NODE_STATUSES = ["online", "offline", "maintenance"] as const;
export const NodeStatus = z.enum(NODE_STATUSES);

export const NodeSpecs = z.object({
  cpuModel: z.string(),
  cpuCores: z.number().int(),
  cpuThreads: z.number().int(),
  ramMb: z.number().int(),
  diskGb: z.number().int(),
  diskType: z.string(),
  networkSpeedMbps: z.number().int(),
  os: z.string(),
  containerVersion: z.string(),
});
export type NodeSpecs = z.infer<typeof NodeSpecs>;

export const Gpu = z.object({
  name: z.string(),
  vramMb: z.number().int(),
  computeVersion: z.string(),
  brand: z.string(),
  computeCores: z.number().int(),
  tensorCores: z.number().int(),
  driverVersion: z.string(),
});
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
    hourlyRateCents: z.number(),
    activeDeployments: z.number().int(),
    maxDeployments: z.number().int(),
    uptimePercent: z.number(),
  })
  .meta({ id: "NodeSummary" });
export type NodeSummary = z.infer<typeof NodeSummary>;

export const NodeDetail = NodeSummary.extend({
  operatorId: z.string(),
  specs: NodeSpecs,
  gpus: z.array(Gpu),
  lastHeartbeat: Timestamp.nullable().meta({ description: "null until the agent first connects" }),
}).meta({ id: "NodeDetail" });
export type NodeDetail = z.infer<typeof NodeDetail>;

export const NodeListQuery = z.strictObject({
  status: NodeStatus.optional(),
  hasGpu: queryBoolean.optional(),
  minGpuVram: z.coerce.number().int().min(0).optional(),
  minCpuCores: z.coerce.number().int().min(0).optional(),
  minRamMb: z.coerce.number().int().min(0).optional(),
  region: Region.optional(),
  maxHourlyRate: z.coerce.number().min(0).optional(),
  ...pageQuery(100),
});
export type NodeListQuery = z.infer<typeof NodeListQuery>;
export const NodeListResponse = z.object({ nodes: z.array(NodeSummary), pagination: Pagination });
export const NodeResponse = z.object({ node: NodeDetail });

export const CreateNodeRequest = z.strictObject({
  name: z.string().trim().min(1).max(100),
  region: Region,
  country: z.string().regex(/^[A-Z]{2}$/, "an ISO 3166-1 alpha-2 country code such as US or DE"),
  hourlyRateCents: z.number().int().min(0).max(1_000_000),
  maxDeployments: z.number().int().min(1).max(256),
});
export const CreateNodeResponse = z.object({
  node: NodeDetail,
  agentToken: z.string().meta({ description: "Shown once: the agent authenticates with it. Stored hashed." }),
});
export const OperatorNodeListResponse = z.object({ nodes: z.array(NodeDetail) });

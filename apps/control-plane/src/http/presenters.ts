import {
  type BalanceMicro,
  type CreditTransactionRow,
  type DeploymentRow,
  microToCredits,
  type NodeRow,
  nodeFree,
  type TemplateRow,
  type UptimeWindows,
  type UserRow,
} from "@cm/db";
import {
  type Balance,
  type Deployment,
  MILLICORES_PER_CORE,
  type NodeDetail,
  type NodeSummary,
  type OperatorNodeDeployment,
  type TemplateDetail,
  type User,
} from "@cm/protocol";

/** Rows to API shapes: the only place that knows both. Pure, so the tests can call them. */

const iso = (ms: number) => new Date(ms).toISOString();

export const presentUser = (u: UserRow): User => ({ id: u.id, walletAddress: u.walletAddress, isOperator: u.isOperator, createdAt: iso(u.createdAt) });

/** `uptime`: the node's percents (uptimePercents); maintenance is shown over whatever its heartbeats say. */
export function presentNodeSummary(n: NodeRow, uptime: UptimeWindows): NodeSummary {
  const s = n.specs;
  return {
    id: n.id,
    name: n.name,
    status: n.maintenanceReason !== null ? "maintenance" : n.status,
    specs: { cpuModel: s.cpuModel, cpuCores: s.cpuCores, cpuThreads: s.cpuThreads, ramMb: s.ramMb, diskGb: s.diskGb, diskType: s.diskType },
    gpus: n.gpus.map((g) => ({ name: g.name, vramMb: g.vramMb, computeVersion: g.computeVersion })),
    region: n.region as NodeSummary["region"],
    country: n.country,
    hourlyRateCents: n.hourlyRateCents,
    activeDeployments: n.activeDeployments,
    maxDeployments: n.maxDeployments,
    ...nodeFree(n),
    uptimePercent: uptime.last30d,
    maintenanceReason: n.maintenanceReason,
    egressPolicy: n.egressPolicy,
  };
}

export function presentNodeDetail(n: NodeRow, uptime: UptimeWindows): NodeDetail {
  return {
    ...presentNodeSummary(n, uptime),
    operatorId: n.operatorId,
    specs: n.specs,
    gpus: n.gpus.map((g) => ({
      name: g.name,
      vramMb: g.vramMb,
      computeVersion: g.computeVersion,
      brand: g.brand,
      computeCores: g.computeCores,
      tensorCores: g.tensorCores,
      driverVersion: g.driverVersion,
    })),
    lastHeartbeat: n.lastHeartbeat === null ? null : iso(n.lastHeartbeat),
    maintenanceSince: n.maintenanceSince === null ? null : iso(n.maintenanceSince),
    uptime,
  };
}

export const presentTemplateSummary = (t: TemplateRow) => ({
  id: t.id,
  slug: t.slug,
  name: t.name,
  description: t.description,
  category: t.category as TemplateDetail["category"],
  requiresGpu: t.requiresGpu,
  minGpuVram: t.minGpuVramMb,
});

export const presentTemplateDetail = (t: TemplateRow): TemplateDetail => ({
  ...presentTemplateSummary(t),
  containerImage: t.containerImage,
  defaultEnv: t.defaultEnv,
  ports: t.ports,
  minCpuCores: t.minCpuCores,
  minRamMb: t.minRamMb,
  minDiskGb: t.minDiskGb,
  estimatedPullTime: t.estimatedPullTimeS,
});

/** Public endpoint URL of a label: https in production, plain http on a local gateway domain. */
export function endpointUrl(label: string, gateway: { domain: string; localPort?: number }) {
  if (gateway.domain === "localhost" || gateway.domain.endsWith(".localhost")) {
    return `http://${label}.${gateway.domain}${gateway.localPort ? `:${gateway.localPort}` : ""}`;
  }
  return `https://${label}.${gateway.domain}`;
}

/** One endpoint per exposed port while the deployment runs; `ready` as the agent last probed it. */
export function presentEndpoints(d: Pick<DeploymentRow, "status" | "ports" | "endpoints" | "endpointKey">, gateway: { domain: string; localPort?: number }) {
  if (d.status !== "running" || !d.endpointKey) return [];
  return d.ports.map((port) => ({
    type: "https" as const,
    url: endpointUrl(`${d.endpointKey}-${port}`, gateway),
    internalPort: port,
    ready: d.endpoints.find((e) => e.internalPort === port)?.ready ?? false,
  }));
}

/** `diskGb`: the deployment's disk allowance (desired-state.ts diskAllowanceGb), null while unknown. */
export function presentDeployment(d: DeploymentRow, gateway: { domain: string; localPort?: number }, diskGb: number | null): Deployment {
  return {
    id: d.id,
    userId: d.userId,
    nodeId: d.nodeId,
    ...(d.templateId ? { templateId: d.templateId } : {}),
    ...(d.name ? { name: d.name } : {}),
    image: d.image,
    status: d.status,
    statusReason: d.statusReason,
    exitCode: d.exitCode,
    endpoints: presentEndpoints(d, gateway),
    env: d.env,
    ports: d.ports,
    tcpPorts: d.tcpPorts,
    command: d.command,
    entrypoint: d.entrypoint,
    registryCredentialId: d.registryCredentialId,
    restart: d.restartPolicy,
    maxRestarts: d.maxRestarts,
    restartCount: d.restartCount,
    gpuCount: d.gpuCount,
    cpuCores: d.cpuMillicores / MILLICORES_PER_CORE,
    memoryMb: d.memoryMb,
    diskGb,
    hourlyRateCents: d.hourlyRateCents,
    totalCost: microToCredits(d.totalCostMicro),
    createdAt: iso(d.createdAt),
    ...(d.startedAt !== null ? { startedAt: iso(d.startedAt) } : {}),
    ...(d.stoppedAt !== null ? { stoppedAt: iso(d.stoppedAt) } : {}),
  };
}

/** A deployment as its node's operator sees it: no env, command or endpoints (the tenant's), and what it earned them. */
export const presentOperatorNodeDeployment = (d: DeploymentRow, earnedMicro: number): OperatorNodeDeployment => ({
  id: d.id,
  status: d.status,
  image: d.image,
  ports: d.ports,
  tcpPorts: d.tcpPorts,
  gpuCount: d.gpuCount,
  cpuCores: d.cpuMillicores / MILLICORES_PER_CORE,
  memoryMb: d.memoryMb,
  hourlyRateCents: d.hourlyRateCents,
  earned: microToCredits(earnedMicro),
  createdAt: iso(d.createdAt),
  startedAt: d.startedAt === null ? null : iso(d.startedAt),
  stoppedAt: d.stoppedAt === null ? null : iso(d.stoppedAt),
});

export const presentBalance = (b: BalanceMicro): Balance => ({
  available: microToCredits(b.availableMicro),
  reserved: microToCredits(b.reservedMicro),
  totalUsed: microToCredits(b.totalUsedMicro),
});

export const presentTransaction = (t: CreditTransactionRow) => ({
  id: t.id,
  type: t.type as "deposit" | "usage" | "refund",
  amount: microToCredits(t.amountMicro),
  description: t.description,
  ...(t.txSignature ? { txSignature: t.txSignature } : {}),
  ...(t.deploymentId ? { deploymentId: t.deploymentId } : {}),
  createdAt: iso(t.createdAt),
});

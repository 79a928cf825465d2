import { NODE_STATUSES, REGIONS, TEMPLATE_CATEGORIES } from "@cm/protocol/lists";
import { intFlag, numberFlag, type Run, str, UsageError } from "../args";
import { cents, gb, gpus } from "./format";

const oneOf = <T extends string>(value: string | undefined, allowed: readonly T[], flag: string): T | undefined => {
  if (value === undefined || (allowed as readonly string[]).includes(value)) return value as T | undefined;
  throw new UsageError(`--${flag} is one of ${allowed.join(", ")}, not ${JSON.stringify(value)}`);
};

export const nodes: Run = async (ctx, { flags }) => {
  const answer = await ctx.client.nodes.list({
    status: oneOf(str(flags, "status"), NODE_STATUSES, "status"),
    hasGpu: flags.gpu === true ? true : undefined,
    minGpuVram: intFlag(flags, "min-vram"),
    minFreeGpus: intFlag(flags, "min-free-gpus"),
    minCpuCores: intFlag(flags, "min-cpu"),
    minRamMb: intFlag(flags, "min-ram"),
    region: oneOf(str(flags, "region"), REGIONS, "region"),
    maxHourlyRate: numberFlag(flags, "max-rate"),
    page: intFlag(flags, "page"),
    limit: intFlag(flags, "limit"),
  });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["ID", "NAME", "STATUS", "REGION", "GPUS", "FREE GPUS", "CPU", "RAM", "RATE/GPU", "SLOTS"],
    answer.nodes.map((n) => [
      n.id,
      n.name,
      n.status,
      n.region,
      gpus(n.gpus),
      `${n.freeGpus}/${n.gpus.length}`,
      `${n.specs.cpuCores} cores`,
      gb(n.specs.ramMb),
      cents(n.hourlyRateCents),
      `${n.activeDeployments}/${n.maxDeployments}`,
    ]),
  );
  const p = answer.pagination;
  ctx.out.note(answer.nodes.length === 0 ? "No nodes match." : `page ${p.page} of ${p.totalPages} (${p.total} nodes)`);
};

export const nodeShow: Run = async (ctx, { args }) => {
  const answer = await ctx.client.nodes.get(args[0]!);
  if (ctx.json) return ctx.out.json(answer);
  const n = answer.node;
  ctx.out.fields([
    ["id", n.id],
    ["name", n.name],
    ["status", n.status],
    ["maintenance", n.maintenanceReason === null ? undefined : `${n.maintenanceReason} (since ${n.maintenanceSince}; no new deployments)`],
    ["region", `${n.region} (${n.country})`],
    ["rate", `${cents(n.hourlyRateCents)} per GPU (once without one)`],
    ["deployments", `${n.activeDeployments} of ${n.maxDeployments}`],
    ["free", `${n.freeGpus} of ${n.gpus.length} GPUs, ${n.freeCpuCores} cores, ${gb(n.freeMemoryMb)}`],
    ["uptime", `${n.uptime.last30d}% over 30 days, ${n.uptime.last7d}% over 7, ${n.uptime.last24h}% over 24 h`],
    ["cpu", `${n.specs.cpuModel}, ${n.specs.cpuCores} cores / ${n.specs.cpuThreads} threads`],
    ["ram", gb(n.specs.ramMb)],
    ["disk", `${n.specs.diskGb} GB ${n.specs.diskType}`],
    ["network", n.specs.networkSpeedMbps ? `${n.specs.networkSpeedMbps} Mbit/s` : undefined],
    ["os", n.specs.os],
    ["docker", n.specs.containerVersion],
    ...n.gpus.map((g, i): [string, string] => [`gpu ${i}`, `${g.brand} ${g.name}, ${gb(g.vramMb)}, compute ${g.computeVersion}, driver ${g.driverVersion}`]),
    ["last heartbeat", n.lastHeartbeat ?? "never"],
    ["operator", n.operatorId],
  ]);
};

export const templates: Run = async (ctx, { flags }) => {
  const answer = await ctx.client.templates.list({
    category: oneOf(str(flags, "category"), TEMPLATE_CATEGORIES, "category"),
    requiresGpu: flags.gpu === true ? true : undefined,
    search: str(flags, "search"),
  });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["SLUG", "NAME", "CATEGORY", "GPU", "ID"],
    answer.templates.map((t) => [t.slug, t.name, t.category, t.requiresGpu ? `yes, ${gb(t.minGpuVram)}` : "no", t.id]),
  );
  if (answer.templates.length === 0) ctx.out.note("No templates match.");
};

export const templateShow: Run = async (ctx, { args }) => {
  const answer = await ctx.client.templates.get(args[0]!);
  if (ctx.json) return ctx.out.json(answer);
  const t = answer.template;
  ctx.out.fields([
    ["id", t.id],
    ["slug", t.slug],
    ["name", t.name],
    ["category", t.category],
    ["description", t.description],
    ["image", t.containerImage],
    ["ports", t.ports.map((p) => `${p.internal}/${p.protocol} (${p.description})`).join(", ")],
    ["needs", `${t.minCpuCores} cores, ${gb(t.minRamMb)} RAM, ${t.minDiskGb} GB disk${t.requiresGpu ? `, a GPU with ${gb(t.minGpuVram)}` : ""}`],
    [
      "env",
      Object.entries(t.defaultEnv)
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
    ],
    ["pull time", `about ${t.estimatedPullTime} s`],
  ]);
};

import { DEPLOYMENT_STATUSES, MAX_RESTARTS_LIMIT, REGIONS } from "@cm/protocol";
import type { DeploymentEstimateResponse, DeploymentStatus } from "@cm/sdk";
import { intFlag, list, numberFlag, type Run, str, UsageError } from "../args";
import type { Context } from "../context";
import { waitForEndpoints } from "./endpoint-wait";
import { cents, credits, endpoints, statusLine } from "./format";

/** Docker's spelling: no, on-failure or on-failure:N. */
function restartFlag(value: string | undefined): { restart?: "no" | "on-failure"; maxRestarts?: number } {
  if (value === undefined) return {};
  const m = /^(no|on-failure)(?::(\d{1,2}))?$/.exec(value);
  if (!m || (m[1] === "no" && m[2] !== undefined))
    throw new UsageError(`--restart is no, on-failure or on-failure:N (N at most ${MAX_RESTARTS_LIMIT}), not ${JSON.stringify(value)}`);
  const maxRestarts = m[2] === undefined ? undefined : Number(m[2]);
  if (maxRestarts !== undefined && (maxRestarts < 1 || maxRestarts > MAX_RESTARTS_LIMIT))
    throw new UsageError(`--restart on-failure:N takes N from 1 to ${MAX_RESTARTS_LIMIT}, not ${maxRestarts}`);
  return { restart: m[1] as "no" | "on-failure", ...(maxRestarts !== undefined ? { maxRestarts } : {}) };
}

export const deploy: Run = async (ctx, { flags, args }) => {
  const template = str(flags, "template");
  const image = str(flags, "image");
  const nodeId = str(flags, "node");
  if ((template === undefined) === (image === undefined)) throw new UsageError("give one of --template and --image");
  const region = str(flags, "region");
  if (region !== undefined && !(REGIONS as readonly string[]).includes(region)) throw new UsageError(`--region is one of ${REGIONS.join(", ")}`);
  const env: Record<string, string> = {};
  for (const pair of list(flags, "env")) {
    const at = pair.indexOf("=");
    if (at < 1) throw new UsageError(`--env takes NAME=VALUE, not ${JSON.stringify(pair)}`);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const ports = list(flags, "port").map((p) => {
    if (!/^\d+$/.test(p)) throw new UsageError(`--port takes a port number, not ${JSON.stringify(p)}`);
    return Number(p);
  });
  const tcpPorts = list(flags, "tcp-port").map((p) => {
    if (!/^\d+$/.test(p)) throw new UsageError(`--tcp-port takes a port number, not ${JSON.stringify(p)}`);
    return Number(p);
  });
  const timeoutS = intFlag(flags, "timeout") ?? 600;
  const entrypoint = str(flags, "entrypoint");
  const restart = restartFlag(str(flags, "restart"));
  const resources = {
    gpuCount: intFlag(flags, "gpus"),
    cpuCores: numberFlag(flags, "cpus"),
    memoryMb: intFlag(flags, "memory"),
    diskGb: intFlag(flags, "disk"),
  };

  // Without --node the control plane picks the cheapest node that meets these, or says why none does.
  const placement = {
    nodeId,
    region: region as (typeof REGIONS)[number] | undefined,
    maxHourlyRate: numberFlag(flags, "max-rate"),
    gpuModel: str(flags, "gpu-model"),
    minGpuVram: intFlag(flags, "min-vram"),
  };
  const body = {
    ...Object.fromEntries(Object.entries(placement).filter(([, v]) => v !== undefined)),
    ...(template ? { templateId: template } : { customImage: image }),
    ...(str(flags, "name") ? { name: str(flags, "name") } : {}),
    ...(Object.keys(env).length ? { env } : {}),
    ...(ports.length ? { ports } : {}),
    ...(tcpPorts.length ? { tcpPorts } : {}),
    ...Object.fromEntries(Object.entries(resources).filter(([, v]) => v !== undefined)),
    // Everything after -- is the container's argv, as docker run takes it: no shell splits it.
    ...(args.length ? { command: args } : {}),
    ...(entrypoint !== undefined ? { entrypoint: [entrypoint] } : {}),
    ...(str(flags, "registry-credential") ? { registryCredentialId: str(flags, "registry-credential") } : {}),
    ...restart,
  };
  if (flags.estimate) return printEstimate(ctx, await ctx.client.deployments.estimate(body));
  const created = await ctx.client.deployments.create(body);
  const d = created.deployment;
  if (!flags.wait) {
    if (ctx.json) return ctx.out.json(created);
    ctx.out.line(d.id);
    ctx.out.note(`Created ${d.id} on ${d.nodeId} (${d.status}), ${cents(created.estimatedHourlyCost)}. Follow it with: cm show ${d.id}`);
    return;
  }
  ctx.out.note(`Created ${d.id} on ${d.nodeId}, ${cents(created.estimatedHourlyCost)}.`);
  let shown = "";
  const show = (change: typeof d) => {
    if (change.status !== shown) ctx.out.note(`  ${new Date().toISOString().slice(11, 19)}  ${statusLine(change)}`);
    shown = change.status;
  };
  show(d);
  const deadlineMs = Date.now() + timeoutS * 1000;
  const started = await ctx.client.deployments.waitFor(d.id, "running", { timeoutMs: timeoutS * 1000, signal: ctx.signal, onChange: show });
  // Running is the container started; a tenant waits for what it serves to answer (a model loading takes minutes).
  if (started.endpoints.length) ctx.out.note(`  ${new Date().toISOString().slice(11, 19)}  waiting for the endpoints to answer`);
  const running = await waitForEndpoints(ctx, started, deadlineMs);
  if (ctx.json) return ctx.out.json({ deployment: running });
  ctx.out.line(running.id);
  // Each answered the probe above: the deployment's own `ready` is the agent's last probe, which may not have come yet.
  for (const e of running.endpoints) ctx.out.note(`  ${e.url} -> ${e.internalPort}`);
};

/**
 * What deploy would do, on stdout: the node, the price, the hold and what it holds, or the refusal it would meet.
 * Exit 0 when it fits and 1 when not, so a script asks `cm deploy ... --estimate && cm deploy ...`.
 */
function printEstimate(ctx: Context, e: DeploymentEstimateResponse): number {
  const code = e.fits ? 0 : 1;
  if (ctx.json) {
    ctx.out.json(e);
    return code;
  }
  ctx.out.fields([
    ["fits", e.fits ? "yes" : `no: ${e.refusal?.code}: ${e.refusal?.message}`],
    ["node", e.nodeId],
    ["rate", e.hourlyRateCents === null ? undefined : cents(e.hourlyRateCents)],
    ["hold", e.holdCredits === null ? undefined : `${credits(e.holdCredits)} credits while it is live (one hour of its rate)`],
    [
      "holds",
      e.gpuCount === null
        ? undefined
        : `${e.gpuCount} GPU${e.gpuCount === 1 ? "" : "s"}, ${e.cpuCores} cores, ${e.memoryMb} MB memory${e.diskGb !== null ? `, ${e.diskGb} GB disk` : ""}`,
    ],
  ]);
  return code;
}

export const ls: Run = async (ctx, { flags }) => {
  const status = str(flags, "status");
  if (status !== undefined && !(DEPLOYMENT_STATUSES as readonly string[]).includes(status))
    throw new UsageError(`--status is one of ${DEPLOYMENT_STATUSES.join(", ")}`);
  const answer = await ctx.client.deployments.list({
    status: status as DeploymentStatus | undefined,
    page: intFlag(flags, "page"),
    limit: intFlag(flags, "limit"),
  });
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.table(
    ["ID", "NAME", "STATUS", "IMAGE", "NODE", "COST", "CREATED"],
    answer.deployments.map((d) => [d.id, d.name ?? "-", d.status, d.image, d.nodeId, credits(d.totalCost), d.createdAt]),
  );
  const p = answer.pagination;
  ctx.out.note(answer.deployments.length === 0 ? "No deployments." : `page ${p.page} of ${p.totalPages} (${p.total} deployments)`);
};

export const show: Run = async (ctx, { args }) => {
  const answer = await ctx.client.deployments.get(args[0]!);
  if (ctx.json) return ctx.out.json(answer);
  const d = answer.deployment;
  ctx.out.fields([
    ["id", d.id],
    ["name", d.name],
    ["status", statusLine(d)],
    ["image", d.image],
    ["template", d.templateId],
    ["node", d.nodeId],
    ["rate", cents(d.hourlyRateCents)],
    [
      "holds",
      `${d.gpuCount} GPU${d.gpuCount === 1 ? "" : "s"}, ${d.cpuCores} cores, ${d.memoryMb} MB memory${d.diskGb !== null ? `, ${d.diskGb} GB disk` : ""}`,
    ],
    ["cost", `${credits(d.totalCost)} credits`],
    ["endpoints", endpoints(d).join(", ")],
    ["ports", d.ports.join(", ")],
    ["tcp ports", d.tcpPorts.join(", ")],
    ["command", d.command ? JSON.stringify(d.command) : "(the image's)"],
    ["entrypoint", d.entrypoint ? JSON.stringify(d.entrypoint) : "(the image's)"],
    ["restart", d.restart === "on-failure" ? `on-failure, ${d.restartCount} of ${d.maxRestarts} restarts used` : "no"],
    ["env", Object.keys(d.env).join(" ")],
    ["created", d.createdAt],
    ["started", d.startedAt],
    ["stopped", d.stoppedAt],
  ]);
};

const action =
  (verb: "start" | "stop") =>
  async (ctx: Context, { args }: { args: string[] }) => {
    const answer = await ctx.client.deployments[verb](args[0]!);
    if (ctx.json) return ctx.out.json(answer);
    ctx.out.note(`${answer.deployment.id} is ${statusLine(answer.deployment)}.`);
  };
export const start: Run = action("start");
export const stop: Run = action("stop");

export const rm: Run = async (ctx, { args }) => {
  const answer = await ctx.client.deployments.remove(args[0]!);
  if (ctx.json) return ctx.out.json(answer);
  ctx.out.note(`${answer.message}.`);
};

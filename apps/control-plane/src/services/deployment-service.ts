import { randomBytes } from "node:crypto";
import { type DeploymentRow, type NodeRow, nodeFree, type OccupyRefusal, type Repos, type TemplateRow } from "@cm/db";
import {
  type CreateDeploymentRequest,
  canDo,
  DEFAULT_MAX_RESTARTS,
  type DeploymentEstimateResponse,
  type DeploymentStatus,
  isLive,
  MILLICORES_PER_CORE,
  PLACEMENT_MAX_TRIES,
  type TenantAction,
} from "@cm/protocol";
import { ApiError } from "../errors";
import { type DeploymentMoves, hourOfCreditsMicro, type MoveResult } from "./deployment-moves";
import { holdingFor, hourlyRateFor } from "./deployment-resources";
import type { EventBus } from "./events";
import type { Clock, IdGenerator } from "./ids";
import { insufficientCredits } from "./insufficient-credits";
import { byPreference, type Candidate, noNodeFits, type PlacementReason, refusalNow, unmetRequirement } from "./placement";
import type { RegistryCredentials } from "./registry-credentials";

/** What the deployment rules need to know about the agents: is anyone there to act? */
export interface NodeLink {
  isConnected(nodeId: string): boolean;
  /** The node's agent reported `image` among its local images with neither CMD nor ENTRYPOINT. */
  imageWithoutCommand?(nodeId: string, image: string): boolean;
}

const refusalMessage: Record<OccupyRefusal, string> = {
  NODE_OFFLINE: "the node is not online",
  NODE_AT_CAPACITY: "the node already runs its maxDeployments",
  NODE_IN_MAINTENANCE: "its operator put the node in maintenance: it takes no new deployments and starts none",
  NODE_INSUFFICIENT_FREE_GPUS: "the node has fewer free GPUs than this deployment holds",
  NODE_INSUFFICIENT_FREE_CPU: "the node has fewer free CPU cores than this deployment holds",
  NODE_INSUFFICIENT_FREE_RAM: "the node has less free memory than this deployment holds",
  NODE_INSUFFICIENT_FREE_DISK: "the node has less free disk than this deployment's disk allowance",
  INSUFFICIENT_CREDITS: "your available credits do not cover one hour of this deployment",
};

/** A node its operator put in maintenance takes nothing new: said with the operator's reason. */
export function inMaintenance(node: NodeRow): ApiError | undefined {
  if (node.maintenanceReason === null) return undefined;
  return new ApiError("NODE_IN_MAINTENANCE", `node ${node.id} is in maintenance and takes no new deployments: ${node.maintenanceReason}`, {
    maintenanceReason: node.maintenanceReason,
    maintenanceSince: node.maintenanceSince === null ? null : new Date(node.maintenanceSince).toISOString(),
  });
}

/** The node meets the template's minimums, or the first reason it does not. */
export function checkRequirements(node: NodeRow, t: TemplateRow | undefined): ApiError | undefined {
  if (!t) return undefined;
  if (t.requiresGpu && node.gpuCount === 0) return new ApiError("NODE_NO_GPU", `template ${t.slug} needs a GPU and node ${node.id} has none`);
  if (t.minGpuVramMb > 0 && node.maxGpuVramMb < t.minGpuVramMb) {
    return new ApiError(
      "NODE_INSUFFICIENT_GPU_VRAM",
      `template ${t.slug} needs ${t.minGpuVramMb} MB of GPU memory; the node's largest GPU has ${node.maxGpuVramMb} MB`,
    );
  }
  if (node.cpuCores < t.minCpuCores)
    return new ApiError("NODE_INSUFFICIENT_CPU", `template ${t.slug} needs ${t.minCpuCores} CPU cores; the node has ${node.cpuCores}`);
  if (node.ramMb < t.minRamMb) return new ApiError("NODE_INSUFFICIENT_RAM", `template ${t.slug} needs ${t.minRamMb} MB of RAM; the node has ${node.ramMb}`);
  return undefined;
}

/**
 * The restart policy as stored: on-failure gets its bound (by default
 * DEFAULT_MAX_RESTARTS), and a bound alone means on-failure, as Docker's
 * on-failure:N; no restarts none.
 */
function restartOf(body: Pick<CreateDeploymentRequest, "restart" | "maxRestarts">) {
  const policy = body.restart ?? (body.maxRestarts !== undefined ? "on-failure" : "no");
  return { restartPolicy: policy, maxRestarts: policy === "on-failure" ? (body.maxRestarts ?? DEFAULT_MAX_RESTARTS) : 0 };
}

/** 16 characters of lowercase base32 (80 bits): a DNS label nobody can guess. */
export const endpointKey = () => {
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  return [...randomBytes(16)].map((b) => alphabet[b & 31]).join("");
};

export type DeploymentServiceOptions = {
  repos: Repos;
  clock: Clock;
  ids: IdGenerator;
  events: EventBus;
  link: NodeLink;
  moves: DeploymentMoves;
  /** Checks a registryCredentialId a create names; absent, naming one is refused as unknown. */
  registryCredentials?: Pick<RegistryCredentials, "checkFor">;
};

/** What the tenant may do with a deployment; every change of status goes through `moves`. */
export function createDeploymentService({ repos, clock, ids, events, link, moves, registryCredentials }: DeploymentServiceOptions) {
  function invalid(dep: DeploymentRow, action: TenantAction | "delete"): ApiError {
    return new ApiError("INVALID_STATE_TRANSITION", `cannot ${action} a deployment that is ${dep.status}`, { currentStatus: dep.status, action });
  }

  /** The moved deployment, or the API's answer to a move that did not happen. */
  async function moved(r: MoveResult, id: string, userId: string, action: TenantAction | "delete"): Promise<DeploymentRow> {
    if (r.ok) {
      events.emit("deployment-changed", r.row);
      return r.row;
    }
    if (r.reason === "CHANGED") throw invalid(await mine(id, userId), action);
    if (r.reason === "INSUFFICIENT_CREDITS") throw await insufficientCredits(repos, userId, (await mine(id, userId)).hourlyRateCents);
    if (r.reason === "NODE_IN_MAINTENANCE") {
      // The operator's reason, as a create naming the node is told.
      const node = await repos.nodes.get((await mine(id, userId)).nodeId);
      const paused = node && inMaintenance(node);
      if (paused) throw paused;
    }
    throw new ApiError(r.reason, refusalMessage[r.reason], r.free);
  }

  /** The ports the gateway serves as endpoints: as asked, else the template's (a custom image's EXPOSE is learned later). */
  function httpPorts(body: CreateDeploymentRequest, template: TemplateRow | undefined): number[] {
    return body.ports ?? template?.ports.map((p) => p.internal) ?? [];
  }

  async function mine(id: string, userId: string) {
    const dep = await repos.deployments.get(id, userId);
    if (!dep) throw new ApiError("DEPLOYMENT_NOT_FOUND", `no deployment ${id}`);
    return dep;
  }

  /** What create and estimate check before any node: one of template and image, the restart policy. */
  async function prepare(body: CreateDeploymentRequest) {
    const hasTemplate = body.templateId !== undefined;
    const hasImage = body.customImage !== undefined && body.customImage !== null;
    if (hasTemplate && hasImage) throw new ApiError("TEMPLATE_AND_IMAGE_CONFLICT", "give templateId or customImage, not both");
    if (!hasTemplate && !hasImage)
      throw new ApiError("TEMPLATE_OR_IMAGE_REQUIRED", "give templateId (from GET /templates) or customImage (an image reference)");
    if (body.maxRestarts !== undefined && body.restart === "no")
      throw new ApiError("RESTART_POLICY_CONFLICT", 'maxRestarts was given with restart "no": leave it out, or give restart "on-failure"');
    const template = hasTemplate ? await repos.templates.getByIdOrSlug(body.templateId!) : undefined;
    if (hasTemplate && !template) throw new ApiError("TEMPLATE_NOT_FOUND", `no template ${body.templateId}`);
    // A port is reached one way: the gateway speaks HTTP to it, or a tenant's TCP connection gets its bytes.
    const ports = new Set(httpPorts(body, template));
    const both = (body.tcpPorts ?? []).filter((p) => ports.has(p));
    if (both.length > 0)
      throw new ApiError(
        "VALIDATION_ERROR",
        `invalid body: tcpPorts ${both.join(", ")} ${both.length > 1 ? "are" : "is"} also an HTTP port (ports, or the template's): give each port one way`,
        [{ field: "tcpPorts", message: `${both.join(", ")} also in ports` }],
      );
    return { template, image: template ? template.containerImage : body.customImage! };
  }

  /** The registry credential the body names is the tenant's and for the image's registry: checked before any node or hold. */
  async function checkCredential(userId: string, body: CreateDeploymentRequest, image: string) {
    if (body.registryCredentialId === undefined) return;
    if (!registryCredentials) throw new ApiError("REGISTRY_CREDENTIAL_NOT_FOUND", `no registry credential ${body.registryCredentialId}`);
    await registryCredentials.checkFor(userId, body.registryCredentialId, image);
  }

  /** The node could take the deployment, its free room aside: what it would hold and its rate, or the refusal. */
  function assess(node: NodeRow, template: TemplateRow | undefined, image: string, body: CreateDeploymentRequest): Candidate | ApiError {
    // Only the node sees its images: what its agent last said of them, before anything is held.
    if (body.command === undefined && body.entrypoint === undefined && link.imageWithoutCommand?.(node.id, image))
      return new ApiError(
        "IMAGE_HAS_NO_COMMAND",
        `node ${node.id} holds ${image} with neither a CMD nor an ENTRYPOINT, and runs its own copy as it is: give a command, e.g. cm deploy --image ${image} -- CMD ARGS..., or "command" in the body`,
      );
    const unmet = checkRequirements(node, template);
    if (unmet) return unmet;
    try {
      const holding = holdingFor(node, template, body);
      return { node, holding, hourlyRateCents: hourlyRateFor(node, holding.gpuCount) };
    } catch (e) {
      if (e instanceof ApiError) return e;
      throw e;
    }
  }

  /** The node the tenant named, as it was before placement existed; a placement requirement it misses answers NO_NODE_FITS. */
  async function onNode(nodeId: string, template: TemplateRow | undefined, image: string, body: CreateDeploymentRequest): Promise<Candidate> {
    const node = await repos.nodes.get(nodeId);
    if (!node) throw new ApiError("NODE_NOT_FOUND", `no node ${nodeId}`);
    const paused = inMaintenance(node);
    if (paused) throw paused;
    if (node.status !== "online") throw new ApiError("NODE_OFFLINE", `node ${node.id} is ${node.status}`);
    const missed = unmetRequirement(node, body);
    if (missed) throw noNodeFits(1, new Map([[missed, 1]]), body);
    const c = assess(node, template, image, body);
    if (c instanceof ApiError) throw c;
    return c;
  }

  /** The online nodes that fit now, best first, and each other one's first reason not to, counted. */
  async function place(template: TemplateRow | undefined, image: string, body: CreateDeploymentRequest) {
    const nodes = await repos.nodes.online();
    const reasons = new Map<PlacementReason, number>();
    const candidates: Candidate[] = [];
    for (const node of nodes) {
      const c = inMaintenance(node)?.code ?? unmetRequirement(node, body) ?? assess(node, template, image, body);
      const reason = typeof c === "string" ? c : c instanceof ApiError ? c.code : refusalNow(node, c.holding);
      if (reason) reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      else candidates.push(c as Candidate);
    }
    return { candidates: candidates.sort(byPreference), online: nodes.length, reasons };
  }

  async function insert(userId: string, template: TemplateRow | undefined, image: string, body: CreateDeploymentRequest, c: Candidate) {
    const now = clock.now();
    return repos.deployments.create(
      {
        id: ids("dep"),
        userId,
        nodeId: c.node.id,
        templateId: template?.id ?? null,
        name: body.name ?? null,
        image,
        env: { ...(template?.defaultEnv ?? {}), ...(body.env ?? {}) },
        ports: httpPorts(body, template),
        tcpPorts: body.tcpPorts ?? [],
        command: body.command ?? null,
        registryCredentialId: body.registryCredentialId ?? null,
        entrypoint: body.entrypoint ?? null,
        ...restartOf(body),
        ...c.holding,
        hourlyRateCents: c.hourlyRateCents,
        endpointKey: endpointKey(),
        createdAt: now,
      },
      hourOfCreditsMicro(c.hourlyRateCents),
      now,
    );
  }

  return {
    mine,

    async create(userId: string, body: CreateDeploymentRequest) {
      const { template, image } = await prepare(body);
      await checkCredential(userId, body, image);
      if (body.nodeId !== undefined) {
        const c = await onNode(body.nodeId, template, image, body);
        const created = await insert(userId, template, image, body, c);
        if ("refused" in created && created.refused === "INSUFFICIENT_CREDITS") throw await insufficientCredits(repos, userId, c.hourlyRateCents);
        if ("refused" in created) throw new ApiError(created.refused, refusalMessage[created.refused], created.free);
        events.emit("deployment-changed", created);
        return { deployment: created, estimatedHourlyCost: c.hourlyRateCents };
      }
      const { candidates, online, reasons } = await place(template, image, body);
      for (const [i, c] of candidates.entries()) {
        if (i === PLACEMENT_MAX_TRIES) {
          reasons.set("untried", candidates.length - i);
          break;
        }
        // The node's row is checked and taken in one UPDATE: a parallel create may have taken the room since it was read.
        const created = await insert(userId, template, image, body, c);
        if (!("refused" in created)) {
          events.emit("deployment-changed", created);
          return { deployment: created, estimatedHourlyCost: c.hourlyRateCents };
        }
        // The cheapest fitting node's hour is the least any would hold.
        if (created.refused === "INSUFFICIENT_CREDITS") throw await insufficientCredits(repos, userId, c.hourlyRateCents);
        reasons.set(created.refused, (reasons.get(created.refused) ?? 0) + 1);
      }
      throw noNodeFits(online, reasons, body);
    },

    /** What create would do now, holding nothing: the node, the rate, the hold, what it holds, or the refusal create would answer. */
    async estimate(userId: string, body: CreateDeploymentRequest): Promise<DeploymentEstimateResponse> {
      const { template, image } = await prepare(body);
      await checkCredential(userId, body, image);
      const none = { nodeId: body.nodeId ?? null, hourlyRateCents: null, holdCredits: null, gpuCount: null, cpuCores: null, memoryMb: null, diskGb: null };
      const refused = (e: ApiError) => ({ code: e.code, message: e.message, ...(e.details !== undefined ? { details: e.details } : {}) });
      let c: Candidate;
      try {
        if (body.nodeId !== undefined) c = await onNode(body.nodeId, template, image, body);
        else {
          const p = await place(template, image, body);
          if (!p.candidates[0]) throw noNodeFits(p.online, p.reasons, body);
          c = p.candidates[0];
        }
      } catch (e) {
        // A node that does not exist is a wrong request, as at create; anything else is the node's answer.
        if (e instanceof ApiError && e.code !== "NODE_NOT_FOUND") return { fits: false, refusal: refused(e), ...none };
        throw e;
      }
      const planned = {
        nodeId: c.node.id,
        hourlyRateCents: c.hourlyRateCents,
        holdCredits: c.hourlyRateCents,
        gpuCount: c.holding.gpuCount,
        cpuCores: c.holding.cpuMillicores / MILLICORES_PER_CORE,
        memoryMb: c.holding.memoryMb,
        diskGb: c.holding.diskGb,
      };
      const busy = refusalNow(c.node, c.holding);
      if (busy) return { fits: false, refusal: refused(new ApiError(busy, refusalMessage[busy], nodeFree(c.node))), ...planned };
      const available = (await repos.ledger.balance(userId)).availableMicro;
      if (available < hourOfCreditsMicro(c.hourlyRateCents))
        return { fits: false, refusal: refused(await insufficientCredits(repos, userId, c.hourlyRateCents)), ...planned };
      return { fits: true, refusal: null, ...planned };
    },

    /** Starts a stopped deployment again: a slot and an hour of credits, as at creation, and a new run. */
    async start(id: string, userId: string) {
      const dep = await mine(id, userId);
      if (!canDo("start", dep.status)) throw invalid(dep, "start");
      // A start by the tenant is a fresh start: on-failure may restart it maxRestarts times again.
      const patch = { desiredState: "running", statusReason: null, exitCode: null, stoppedAt: null, restartCount: 0 } as const;
      return moved(await moves.move(dep, "starting", { patch, nowMs: clock.now() }), id, userId, "start");
    },

    async stop(id: string, userId: string) {
      const dep = await mine(id, userId);
      if (!canDo("stop", dep.status)) throw invalid(dep, "stop");
      // With no agent to carry the stop out, nothing runs there to wait for: the
      // deployment is stopped now, and a returning agent converges to it.
      const to: DeploymentStatus = link.isConnected(dep.nodeId) ? "stopping" : "stopped";
      const patch = { desiredState: "stopped", statusReason: "stopped by the tenant" } as const;
      return moved(await moves.move(dep, to, { patch, nowMs: clock.now() }), id, userId, "stop");
    },

    /** The tenant deleted it: settled and out of the live states at once; the agent removes the container. */
    async remove(id: string, userId: string) {
      // A delete is valid from every state: one that raced an agent's report (the row moved between the read
      // and the move: CHANGED) is tried again on the fresh row, rather than answered 409 for a state it accepts.
      for (let attempt = 0; ; attempt++) {
        const dep = await mine(id, userId);
        const nowMs = clock.now();
        const patch = { desiredState: "removed", deletedAt: nowMs, statusReason: dep.statusReason ?? "deleted by the tenant" } as const;
        const r = await moves.move(dep, isLive(dep.status) ? "stopped" : dep.status, { patch, nowMs });
        if (r.ok || r.reason !== "CHANGED" || attempt === 2) return moved(r, id, userId, "delete");
      }
    },
  };
}
export type DeploymentService = ReturnType<typeof createDeploymentService>;

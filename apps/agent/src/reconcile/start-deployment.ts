// Makes a desired-running deployment real from nothing: image, GPUs, limits,
// container, start. Every failure becomes a DeploymentFailure whose message the
// tenant can read.
import type { DeploymentSpec, KeyedQueue } from "@cm/protocol";
import type { Clock } from "../clock";
import { RegistryRefusedError } from "../egress/registry-guard";
import type { GpuInfo } from "../host/types";
import type { Logger } from "../logger";
import type { ContainerRuntime } from "../runtime/container-runtime";
import { dockerMessage, ImageUnavailableError } from "../runtime/errors";
import { LABEL_INSTALL_ID } from "../runtime/labels";
import type { ContainerState } from "../runtime/types";
import { pickGpus } from "./gpu-assignment";
import { containerName, gpusOf, runLabels } from "./labels";
import { DEFAULT_PULL_STALL_S, DEFAULT_PULL_TIMEOUT_S, PullLimitError, type PullLimits, watchPull } from "./pull-watch";
import { containerResources, shmSizeMb } from "./resources";
import type { StatusReporter } from "./status-reporter";

/** Docker's words when the network namespace a container was made to join is gone: `container:<sandbox>` whose process ended. */
const SANDBOX_GONE =
  /namespace path: lstat \/proc\/\d+\/ns\/net|cannot join network (namespace )?of (a non running )?container|joining network namespace of container/i;

/** Docker's words when neither the image nor the create gives a command to run. */
const NO_COMMAND = /no command specified/i;
/** The node is the one place that sees the image, so it is here that a missing command is found, and told with its fix. */
export const noCommandReason = (image: string) =>
  `the image ${image} has no CMD (nor ENTRYPOINT) and the deployment gives no command: give one, e.g. cm deploy --image ${image} -- CMD ARGS..., or "command" in POST /deployments`;

export class DeploymentFailure extends Error {
  override readonly name = "DeploymentFailure";
}

export interface NodeFacts {
  gpus: GpuInfo[];
  cpuThreads: number;
  ramMb: number;
}

export interface StartContext {
  runtime: ContainerRuntime;
  reporter: StatusReporter;
  logger: Logger;
  nodeId: string;
  /** extra labels on every container, and the filter that finds ours */
  containerLabels: Record<string, string>;
  /** stamped on the container too (install-identity.ts) */
  installId?: string;
  nodeFacts(): Promise<NodeFacts>;
  /** serializes GPU picking with container creation across deployments */
  gpuLock: KeyedQueue;
  /** true when a newer desired state for this deployment has arrived meanwhile */
  superseded(): boolean;
  /** aborted when a newer desired state for this deployment arrives: a pull under way ends at once */
  signal?: AbortSignal;
  clock: Clock;
  /** how long a pull may take, and wait for progress (pull-watch.ts); the defaults without */
  pullLimits?: PullLimits;
  /** rejects, saying why for the tenant, when the node must not pull `image` (egress/registry-guard.ts) */
  checkRegistry?(image: string): Promise<void>;
  /** rejects, saying why for the tenant, when this node must not start the deployment now (egress policy missing, disk full) */
  admit?(spec: DeploymentSpec): Promise<void>;
  /** the node's disk allowance for a deployment whose spec names none (a custom image): AGENT_DISK_DEFAULT_GB */
  diskDefaultGb?: number;
  /** Docker found `image` has no command: the control plane should hear of it before the next deployment of it */
  imageWithoutCommand?(image: string): void;
}

/** Resolves with the running container, or undefined when superseded; rejects with DeploymentFailure. */
export async function startDeployment(ctx: StartContext, spec: DeploymentSpec): Promise<ContainerState | undefined> {
  if (ctx.admit) {
    try {
      await ctx.admit(spec);
    } catch (error) {
      throw new DeploymentFailure((error as Error).message);
    }
  }
  const image = await ensureImage(ctx, spec);
  if (image === undefined || ctx.superseded()) return undefined;
  const facts = await ctx.nodeFacts();
  const resources = containerResources(spec, { cpuThreads: facts.cpuThreads, ramMb: facts.ramMb, gpuCount: facts.gpus.length });

  // Stamped on the container (and Docker's cap where it has one), so the disk
  // watcher and whoever reads the container later see the allowance the tenant was shown.
  const diskGb = spec.diskGb ?? ctx.diskDefaultGb;
  const containerId = await ctx.gpuLock.run("gpus", async () => {
    const gpuUuids = await pickFreeGpus(ctx, facts.gpus, spec.gpuCount);
    ctx.reporter.status(spec.deploymentId, spec.runSeq, "starting");
    const create = async () => {
      try {
        return await ctx.runtime.createContainer({
          deploymentId: spec.deploymentId,
          nodeId: ctx.nodeId,
          userId: spec.userId,
          image,
          env: spec.env,
          ...(spec.command ? { cmd: spec.command } : {}),
          ...(spec.entrypoint ? { entrypoint: spec.entrypoint } : {}),
          exposedPorts: spec.ports,
          ...(spec.tcpPorts?.length ? { tcpPorts: spec.tcpPorts } : {}),
          cpuCores: resources.cpuCores,
          cpuLimit: resources.cpuLimit,
          memoryMb: resources.memoryMb,
          shmMb: shmSizeMb(resources.memoryMb),
          ...(diskGb !== undefined ? { diskGb } : {}),
          gpuDeviceIds: gpuUuids,
          labels: { ...ctx.containerLabels, ...(ctx.installId ? { [LABEL_INSTALL_ID]: ctx.installId } : {}), ...runLabels(spec.runSeq, gpuUuids) },
          name: containerName(spec.deploymentId, spec.runSeq),
        });
      } catch (error) {
        const message = dockerMessage(error);
        if (NO_COMMAND.test(message)) {
          ctx.imageWithoutCommand?.(spec.image);
          throw new DeploymentFailure(noCommandReason(spec.image));
        }
        throw new DeploymentFailure(`could not create the container: ${message}`);
      }
    };
    for (let attempt = 1; ; attempt++) {
      const id = await create();
      try {
        await ctx.runtime.start(id);
        return id;
      } catch (error) {
        // A container that never ran is of no use to anyone; leave no debris behind (its sandbox goes with it).
        const removed = await ctx.runtime.remove(id).then(
          () => true,
          () => false,
        );
        // The network sandbox it joined ended between being handed out and this start (stopped by
        // someone, or its process killed): nothing the tenant did. Once more, with another sandbox,
        // under the same name: only once this one is gone.
        if (attempt === 1 && removed && SANDBOX_GONE.test(dockerMessage(error))) {
          ctx.logger.warn("The container's network sandbox ended before it started; starting again with another", {
            deploymentId: spec.deploymentId,
            error: dockerMessage(error),
          });
          continue;
        }
        throw new DeploymentFailure(`could not start the container: ${dockerMessage(error)}`);
      }
    }
  });
  ctx.logger.info("Started a deployment's container", { deploymentId: spec.deploymentId, runSeq: spec.runSeq, containerId, ...resources });
  return ctx.runtime.inspect(containerId);
}

/** The image's local name; undefined when a newer desired state ended the pull. */
async function ensureImage(ctx: StartContext, spec: DeploymentSpec): Promise<string | undefined> {
  const limits = ctx.pullLimits ?? { timeoutMs: DEFAULT_PULL_TIMEOUT_S * 1000, stallMs: DEFAULT_PULL_STALL_S * 1000 };
  const watch = watchPull(ctx.clock, limits, spec.image, ctx.signal);
  try {
    if (ctx.signal?.aborted) return undefined;
    if (!(await ctx.runtime.imagePresent(spec.image))) {
      ctx.reporter.status(spec.deploymentId, spec.runSeq, "pulling");
      await ctx.checkRegistry?.(spec.image);
    }
    const ensured = await ctx.runtime.ensureImage(spec.image, {
      onProgress: (progress) => {
        watch.progressed();
        ctx.reporter.pullProgress(spec.deploymentId, progress);
      },
      ...(spec.registryAuth ? { auth: spec.registryAuth } : {}),
      signal: watch.signal,
    });
    return ensured.ref;
  } catch (error) {
    if (ctx.signal?.aborted || ctx.superseded()) return undefined;
    if (error instanceof PullLimitError || error instanceof RegistryRefusedError) throw new DeploymentFailure(error.message);
    if (error instanceof ImageUnavailableError) throw new DeploymentFailure(error.message);
    throw new DeploymentFailure(`could not get image "${spec.image}": ${dockerMessage(error)}`);
  } finally {
    watch.done();
  }
}

async function pickFreeGpus(ctx: StartContext, gpus: GpuInfo[], count: number): Promise<string[]> {
  if (count === 0) return [];
  // Every managed container on this machine counts, whichever node or run made it: the GPUs are physical.
  const running = (await ctx.runtime.listManaged(ctx.containerLabels)).filter((container) => container.running);
  const pick = pickGpus(gpus, new Set(running.flatMap(gpusOf)), count);
  if (!pick.ok) throw new DeploymentFailure(pick.reason);
  return pick.uuids;
}

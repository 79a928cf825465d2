// Bounds what tenants write to the operator's disk. overlay2 can cap a writable
// layer only on xfs with project quotas, which most machines lack, so the agent
// measures each container's layer on an interval and stops a deployment past
// its allowance; and it refuses new deployments when the disk is nearly full,
// keeping a reserve for the machine itself.
import type { Clock, TimerHandle } from "../clock";
import type { Logger } from "../logger";
import type { DiskClient, WritableLayer } from "../runtime/docker-disk-client";

export const BYTES_PER_GB = 1_000_000_000;

export interface DiskOverrun {
  layer: WritableLayer;
  allowanceGb: number;
  reason: string;
}

/** The running containers past their allowance; one without an allowance label gets the node's default. */
export function overAllowance(layers: WritableLayer[], defaultGb: number): DiskOverrun[] {
  return layers
    .filter((layer) => layer.running)
    .flatMap((layer) => {
      const allowanceGb = layer.diskGb ?? defaultGb;
      if (layer.sizeBytes <= allowanceGb * BYTES_PER_GB) return [];
      const reason = `the container wrote ${gb(layer.sizeBytes)} GB to its disk, past its allowance of ${allowanceGb} GB, and was stopped`;
      return [{ layer, allowanceGb, reason }];
    });
}

/** Why a deployment of `allowanceGb` may not start with `freeBytes` left, or undefined when it may. */
export function admissionProblem(freeBytes: number, reserveGb: number, allowanceGb: number): string | undefined {
  if (freeBytes - allowanceGb * BYTES_PER_GB >= reserveGb * BYTES_PER_GB) return undefined;
  return `this node has ${gb(freeBytes)} GB of disk free, not enough for the deployment's ${allowanceGb} GB beside the ${reserveGb} GB it keeps for itself`;
}

function gb(bytes: number): string {
  return (bytes / BYTES_PER_GB).toFixed(bytes < 10 * BYTES_PER_GB ? 2 : 1);
}

export interface DiskWatcherOptions {
  disk: DiskClient;
  /** Docker's data root, where images and writable layers live */
  dataRoot(): Promise<string>;
  reserveGb: number;
  defaultGb: number;
  checkMs: number;
  clock: Clock;
  logger: Logger;
  /** the agent's extra container labels: only its own containers are measured */
  containerLabels: Record<string, string>;
  /** ends the deployment and tells its tenant why */
  stopDeployment(deploymentId: string, containerId: string, reason: string): Promise<void>;
}

export class DiskWatcher {
  private timer: TimerHandle | undefined;
  private running = false;

  constructor(private readonly options: DiskWatcherOptions) {}

  start(): void {
    this.running = true;
    this.schedule();
  }

  stop(): void {
    this.running = false;
    this.options.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Rejects when the disk cannot hold a new deployment of `diskGb` (the node's default when absent) above the reserve. */
  async admit(diskGb: number | undefined): Promise<void> {
    let free: number;
    try {
      free = await this.options.disk.freeBytes(await this.options.dataRoot());
    } catch (error) {
      // Docker's data root is not visible here (a remote engine): nothing to measure, nothing to refuse.
      this.options.logger.debug("Cannot measure free disk on Docker's data root", { error: (error as Error).message });
      return;
    }
    const problem = admissionProblem(free, this.options.reserveGb, diskGb ?? this.options.defaultGb);
    if (problem) throw new Error(problem);
  }

  /** Measures now and stops every deployment past its allowance. */
  async check(): Promise<DiskOverrun[]> {
    const layers = await this.options.disk.writableLayers(this.options.containerLabels);
    const overruns = overAllowance(layers, this.options.defaultGb);
    for (const overrun of overruns) {
      const { deploymentId, containerId, sizeBytes } = overrun.layer;
      this.options.logger.warn("A deployment wrote past its disk allowance; stopping it", {
        deploymentId,
        containerId,
        sizeBytes,
        allowanceGb: overrun.allowanceGb,
      });
      await this.options
        .stopDeployment(deploymentId, containerId, overrun.reason)
        .catch((error: unknown) =>
          this.options.logger.error("Could not stop a deployment past its disk allowance", { deploymentId, error: (error as Error).message }),
        );
    }
    return overruns;
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = this.options.clock.setTimeout(() => {
      void this.check()
        .catch((error: unknown) => this.options.logger.warn("Could not measure containers' disk use", { error: (error as Error).message }))
        .then(() => this.schedule());
    }, this.options.checkMs);
  }
}

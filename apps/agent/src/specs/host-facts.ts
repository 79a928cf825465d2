// What the host probe says about this machine, probed once and then refreshed
// on the specs interval: systeminformation and nvidia-smi take up to seconds,
// too slow to ask for every container start.
import type { HostProbe } from "../host/probe";
import type { GpuProbeResult, NodeSpecs } from "../host/types";
import type { Logger } from "../logger";
import type { NodeFacts } from "../reconcile/start-deployment";

export interface HostSnapshot {
  specs: NodeSpecs | undefined;
  gpus: GpuProbeResult;
}

export class HostFacts {
  private latest: HostSnapshot | undefined;
  private probing: Promise<HostSnapshot> | undefined;

  constructor(
    private readonly probe: HostProbe,
    private readonly logger: Logger,
  ) {}

  /** Probes again (sharing a probe already under way). */
  refresh(): Promise<HostSnapshot> {
    this.probing ??= this.probeOnce().finally(() => (this.probing = undefined));
    return this.probing;
  }

  async current(): Promise<HostSnapshot> {
    return this.latest ?? this.refresh();
  }

  async nodeFacts(): Promise<NodeFacts> {
    const { specs, gpus } = await this.current();
    return { gpus: gpus.gpus, cpuThreads: specs?.cpuThreads ?? 0, ramMb: specs?.ramMb ?? 0 };
  }

  private async probeOnce(): Promise<HostSnapshot> {
    const [specs, gpus] = await Promise.all([
      this.probe.specs().catch((error: unknown) => {
        this.logger.warn("Could not read this machine's specs", { error });
        return undefined;
      }),
      this.probe.gpus(),
    ]);
    if (gpus.warning) this.logger.warn(`GPUs: ${gpus.warning}`);
    else if (gpus.note) this.logger.info(`GPUs: none (${gpus.note}): this node takes CPU-only deployments`);
    this.latest = { specs: specs ?? this.latest?.specs, gpus };
    return this.latest;
  }
}

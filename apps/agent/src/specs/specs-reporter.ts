// Sends `specs` after every welcome, then re-probes and re-sends on an interval
// so replaced disks, added RAM or a GPU that fell off the bus reach the catalogue.
import type { Clock, TimerHandle } from "../clock";
import type { Logger } from "../logger";
import type { HostFacts, HostSnapshot } from "./host-facts";

export interface SpecsReporterOptions {
  facts: HostFacts;
  send(frame: ReturnType<typeof specsFrame>): boolean;
  clock: Clock;
  logger: Logger;
  intervalMs: number;
  /** the egress policy's state now (egress/egress-guard.ts); "missing" is not told: such a node starts nothing */
  egressPolicy?: () => "enforced" | "off" | "missing";
  /** AGENT_DISK_DEFAULT_GB: the control plane shows it to tenants as their custom images' disk allowance */
  diskDefaultGb?: number;
  /** local images with neither CMD nor ENTRYPOINT (runtime's imagesWithoutCommand): the control plane refuses deployments of them that give no command */
  imagesWithoutCommand?: () => Promise<string[]>;
}

/** What the node says of itself beside its inventory, for tenants to read on the node and its deployments. */
export interface NodePolicies {
  egressPolicy?: "enforced" | "off" | "missing" | undefined;
  diskDefaultGb?: number | undefined;
  imagesWithoutCommand?: string[] | undefined;
}

export function specsFrame(snapshot: HostSnapshot & { specs: NonNullable<HostSnapshot["specs"]> }, policies: NodePolicies = {}) {
  const { egressPolicy, diskDefaultGb, imagesWithoutCommand } = policies;
  return {
    type: "specs" as const,
    specs: snapshot.specs,
    gpus: snapshot.gpus.gpus,
    ...(snapshot.gpus.warning ? { gpuWarning: snapshot.gpus.warning } : {}),
    ...(egressPolicy === "enforced" || egressPolicy === "off" ? { egressPolicy } : {}),
    ...(diskDefaultGb !== undefined ? { diskDefaultGb } : {}),
    ...(imagesWithoutCommand !== undefined ? { imagesWithoutCommand } : {}),
  };
}

export class SpecsReporter {
  private timer: TimerHandle | undefined;
  private generation = 0;

  constructor(private readonly options: SpecsReporterOptions) {}

  /** On welcome: send what is known now (probing first if nothing is), then keep it fresh. */
  start(): void {
    this.stop();
    const generation = ++this.generation;
    void this.options.facts.current().then((snapshot) => {
      if (generation === this.generation) return this.send(snapshot, generation);
    });
    this.schedule(generation);
  }

  /** Sends what is known again now (the images changed), the hardware as last probed; nothing before start. */
  resend(): void {
    if (this.timer === undefined) return;
    const generation = this.generation;
    void this.options.facts.current().then((snapshot) => {
      if (generation === this.generation) return this.send(snapshot, generation);
    });
  }

  stop(): void {
    this.generation += 1;
    this.options.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(generation: number): void {
    this.timer = this.options.clock.setTimeout(async () => {
      const snapshot = await this.options.facts.refresh();
      if (generation !== this.generation) return;
      await this.send(snapshot, generation);
      this.schedule(generation);
    }, this.options.intervalMs);
  }

  private async send(snapshot: HostSnapshot, generation: number): Promise<void> {
    if (!snapshot.specs) {
      this.options.logger.warn("Not sending specs: this machine's specs could not be read");
      return;
    }
    // Docker not answering leaves the list out: the control plane then refuses nothing for want of a command.
    const imagesWithoutCommand = await this.options.imagesWithoutCommand?.().catch((error: unknown) => {
      this.options.logger.warn("Could not list the images without a command", { error });
      return undefined;
    });
    if (generation !== this.generation) return;
    this.options.send(
      specsFrame(
        { ...snapshot, specs: snapshot.specs },
        { egressPolicy: this.options.egressPolicy?.(), diskDefaultGb: this.options.diskDefaultGb, imagesWithoutCommand },
      ),
    );
  }
}

// Tells the control plane which exposed ports of each running deployment accept
// connections, so a tenant's endpoint shows `ready` only once its server
// listens. Probes often while some port is not ready yet, rarely once all are;
// sends only what changed, and everything again after each welcome.
import type { Clock, TimerHandle } from "../clock";
import type { Logger } from "../logger";

export interface PortReadiness {
  port: number;
  ready: boolean;
}

export interface EndpointReporterOptions {
  /** the deployment's exposed ports and whether each accepts a TCP connection now; undefined: cannot tell yet (no running container) */
  probe(deploymentId: string): Promise<PortReadiness[] | undefined>;
  running(): string[];
  send(frame: { type: "endpoints"; deploymentId: string; ports: PortReadiness[] }): boolean;
  clock: Clock;
  logger: Logger;
  /** between probes while some port is not ready */
  probeMs: number;
  /** between probes once every port is ready */
  idleProbeMs: number;
}

/** The wire takes at most this many ports per deployment. */
const MAX_PORTS = 64;

export class EndpointReporter {
  private readonly sent = new Map<string, string>();
  private timer: TimerHandle | undefined;
  private generation = 0;

  constructor(private readonly options: EndpointReporterOptions) {}

  /** On welcome: report every deployment afresh, then keep watching. */
  start(): void {
    this.stop();
    this.sent.clear();
    this.schedule(++this.generation, 0);
  }

  stop(): void {
    this.generation += 1;
    this.options.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Probe now, e.g. right after a deployment started. */
  poke(): void {
    if (this.timer !== undefined) this.schedule(this.generation, 0);
  }

  private schedule(generation: number, delayMs: number): void {
    this.options.clock.clearTimeout(this.timer);
    this.timer = this.options.clock.setTimeout(() => void this.tick(generation), delayMs);
  }

  private async tick(generation: number): Promise<void> {
    let allReady = true;
    const running = new Set(this.options.running());
    for (const id of this.sent.keys()) if (!running.has(id)) this.sent.delete(id);
    for (const deploymentId of running) {
      const ports = await this.options.probe(deploymentId).catch((error: unknown) => {
        this.options.logger.debug("Could not probe a deployment's ports", { deploymentId, error });
        return undefined;
      });
      if (generation !== this.generation) return;
      if (!ports) {
        allReady = false; // not known yet (the container is starting, or the probe failed): look again soon
        continue;
      }
      if (ports.some((port) => !port.ready)) allReady = false;
      const key = JSON.stringify(ports);
      if (ports.length === 0 || this.sent.get(deploymentId) === key) continue;
      if (this.options.send({ type: "endpoints", deploymentId, ports: ports.slice(0, MAX_PORTS) })) this.sent.set(deploymentId, key);
    }
    if (generation === this.generation) this.schedule(generation, allReady ? this.options.idleProbeMs : this.options.probeMs);
  }
}

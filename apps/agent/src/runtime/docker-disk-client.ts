// How much each managed container has written: the size of its writable layer,
// as `docker ps --size` tells it. Docker walks each layer to answer, so this is
// for an interval, never the deploy path.
import { statfs } from "node:fs/promises";
import type Docker from "dockerode";
import { LABEL_DEPLOYMENT_ID, LABEL_DISK_GB, managedLabelFilter } from "./labels";
import type { RuntimeLogger } from "./logger";

export interface WritableLayer {
  containerId: string;
  deploymentId: string;
  running: boolean;
  /** bytes written on top of the image (SizeRw) */
  sizeBytes: number;
  /** the allowance stamped at creation (LABEL_DISK_GB); undefined for containers made before allowances */
  diskGb: number | undefined;
}

/** The engine's disk, as the disk watcher needs it. DockerRuntime implements it; the ContainerRuntime contract does not include it. */
export interface DiskClient {
  writableLayers(filterLabels?: Record<string, string>): Promise<WritableLayer[]>;
  /** free bytes (for unprivileged users, as df shows them) on the filesystem holding `path` */
  freeBytes(path: string): Promise<number>;
}

/** One `docker ps --size` entry in the agent's words. */
export function toWritableLayer(info: Pick<Docker.ContainerInfo, "Id" | "Labels" | "State"> & { SizeRw?: number }): WritableLayer {
  const diskGb = Number(info.Labels[LABEL_DISK_GB]);
  return {
    containerId: info.Id,
    deploymentId: info.Labels[LABEL_DEPLOYMENT_ID] ?? "",
    running: info.State === "running",
    sizeBytes: info.SizeRw ?? 0,
    diskGb: Number.isFinite(diskGb) && diskGb > 0 ? diskGb : undefined,
  };
}

export class DockerDiskClient implements DiskClient {
  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
  ) {}

  async writableLayers(filterLabels: Record<string, string> = {}): Promise<WritableLayer[]> {
    this.logger.debug("Measuring containers' writable layers");
    const list = await this.docker.listContainers({ all: true, size: true, filters: managedLabelFilter(filterLabels) });
    return list.map(toWritableLayer);
  }

  async freeBytes(path: string): Promise<number> {
    const stats = await statfs(path);
    return stats.bavail * stats.bsize;
  }
}

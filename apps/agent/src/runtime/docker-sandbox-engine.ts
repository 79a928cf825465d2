// The network sandbox pool's engine on Docker through dockerode: how a sandbox,
// its network and its users look on the engine, and Docker's answers the pool
// must not take for failures (gone already, removal begun by someone else).
import type Docker from "dockerode";
import { BRIDGE_NAME_OPTION, buildSandboxCreateOptions, buildSandboxNetworkOptions } from "./create-options";
import { dockerStatusCode, ignoringStatus } from "./errors";
import { LABEL_SANDBOX, LABEL_SANDBOX_NAME } from "./labels";
import type { RuntimeLogger } from "./logger";
import type { NewSandbox, SandboxEngine, SandboxHolder, SandboxNetwork, SandboxUser } from "./sandbox-engine";
import { SandboxVanishedError } from "./sandbox-engine";
import { SandboxImage } from "./sandbox-image";
import { CONFLICT, NOT_FOUND, REMOVAL_WAIT_MS } from "./sandbox-settings";

export class DockerSandboxEngine implements SandboxEngine {
  private readonly image: SandboxImage;

  constructor(
    private readonly docker: Docker,
    logger: RuntimeLogger,
  ) {
    this.image = new SandboxImage(docker, logger);
  }

  async listSandboxes(labels: Record<string, string>): Promise<SandboxHolder[]> {
    const listed = await this.docker.listContainers({ all: true, filters: sandboxFilters(labels) });
    return listed.map((holder) => ({
      name: holder.Names[0]?.replace(/^\//, "") ?? "",
      state: holder.State,
      createdMs: holder.Created * 1000,
      labels: holder.Labels,
    }));
  }

  async listNetworks(labels: Record<string, string>): Promise<SandboxNetwork[]> {
    const listed = await this.docker.listNetworks({ filters: sandboxFilters(labels) });
    return listed.map((network) => ({
      name: network.Name,
      createdMs: Date.parse(network.Created),
      labels: network.Labels ?? {},
      bridge: network.Options?.[BRIDGE_NAME_OPTION],
    }));
  }

  async listUsers(): Promise<SandboxUser[]> {
    const listed = await this.docker.listContainers({ all: true, filters: { label: [LABEL_SANDBOX_NAME] } });
    return listed.map((user) => ({ sandbox: user.Labels[LABEL_SANDBOX_NAME] ?? "", state: user.State }));
  }

  async prepare(): Promise<void> {
    await this.image.get();
  }

  async create({ name, labels, bridgePrefix }: NewSandbox): Promise<void> {
    const image = await this.image.get();
    try {
      await this.docker.createNetwork(buildSandboxNetworkOptions(name, labels, bridgePrefix));
      const container = await this.docker.createContainer(buildSandboxCreateOptions(name, image, labels));
      await container.start();
    } catch (error) {
      if (dockerStatusCode(error) !== NOT_FOUND) throw error;
      // Most likely the image was removed (an operator's `docker image prune`): made again when next asked for.
      this.image.forget();
      throw new SandboxVanishedError((error as Error).message, { cause: error });
    }
  }

  /** Gone when this settles: a removal someone else began (`docker rm -f`) is waited for, since its network is in use until then. */
  async removeContainer(name: string): Promise<void> {
    const container = this.docker.getContainer(name);
    try {
      await container.remove({ force: true });
    } catch (error) {
      const status = dockerStatusCode(error);
      if (status === NOT_FOUND) return;
      // Only "removal already in progress" is waited for, and not forever: any other conflict is an error to report.
      if (status !== CONFLICT || !/already in progress/i.test((error as Error).message)) throw error;
      let timer: NodeJS.Timeout | undefined;
      const patience = new Promise<never>(
        (_, reject) =>
          (timer = setTimeout(() => reject(new Error(`sandbox ${name} was still being removed after ${REMOVAL_WAIT_MS / 1000} s`)), REMOVAL_WAIT_MS)),
      );
      try {
        await Promise.race([ignoringStatus(NOT_FOUND, () => container.wait({ condition: "removed" })), patience]);
      } finally {
        clearTimeout(timer);
      }
    }
  }

  removeNetwork(name: string): Promise<void> {
    return ignoringStatus(NOT_FOUND, () => this.docker.getNetwork(name).remove());
  }

  async running(name: string): Promise<boolean> {
    try {
      return (await this.docker.getContainer(name).inspect()).State.Running;
    } catch (error) {
      if (dockerStatusCode(error) === NOT_FOUND) return false;
      throw error;
    }
  }

  async address(name: string): Promise<string | null> {
    try {
      const info = await this.docker.getContainer(name).inspect();
      return info.State.Running ? info.NetworkSettings?.Networks?.[name]?.IPAddress || null : null;
    } catch (error) {
      if (dockerStatusCode(error) === NOT_FOUND) return null;
      throw error;
    }
  }
}

function sandboxFilters(labels: Record<string, string>) {
  return { label: [`${LABEL_SANDBOX}=true`, ...Object.entries(labels).map(([key, value]) => `${key}=${value}`)] };
}

import type Docker from "dockerode";
import type { ContainerClient } from "./container-runtime";
import { toContainerExit, toContainerState } from "./container-state";
import { buildContainerCreateOptions, mayCapWritableLayers } from "./create-options";
import { ContainerNotFoundError, dockerStatusCode, ignoringStatus } from "./errors";
import { deploymentNetworkName, LABEL_DEPLOYMENT_ID, LABEL_SANDBOX_NAME, managedLabelFilter } from "./labels";
import type { RuntimeLogger } from "./logger";
import type { SandboxPool } from "./sandboxes";
import type { ContainerExit, ContainerSpec, ContainerState } from "./types";

const NOT_FOUND = 404;
const NOT_MODIFIED = 304; // start of a running / stop of a stopped container
const CONFLICT = 409; // name taken, or removal already in progress

/** Docker's refusal of a size limit on a filesystem without project quotas. */
const NO_LAYER_QUOTA = /storage-?opt.*(only|not supported)|pquota|project quota/i;

export class DockerContainerClient implements ContainerClient {
  /** whether creates may ask for a size limit on the writable layer; settled once per agent */
  private capsLayers: Promise<boolean> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly logger: RuntimeLogger,
    private readonly sandboxes: SandboxPool,
  ) {}

  async createContainer(spec: ContainerSpec): Promise<string> {
    const sandbox = await this.sandboxes.take({ nodeId: spec.nodeId, labels: spec.labels ?? {} });
    this.logger.debug("Creating container", { deploymentId: spec.deploymentId, image: spec.image, sandbox });
    try {
      const capsWritableLayer = spec.diskGb !== undefined && (await this.capsWritableLayers());
      let container: Docker.Container;
      try {
        container = await this.docker.createContainer(buildContainerCreateOptions(spec, sandbox, { capsWritableLayer }));
      } catch (error) {
        if (!capsWritableLayer || !NO_LAYER_QUOTA.test((error as Error).message)) throw error;
        // xfs without pquota: measuring (disk/disk-watcher.ts) is all there is.
        this.logger.warn("Docker cannot cap writable layers here (xfs without pquota); disk allowances are measured instead");
        this.capsLayers = Promise.resolve(false);
        container = await this.docker.createContainer(buildContainerCreateOptions(spec, sandbox));
      }
      this.sandboxes.joined(sandbox);
      this.logger.debug("Created container", { deploymentId: spec.deploymentId, containerId: container.id });
      return container.id;
    } catch (error) {
      await this.sandboxes.remove(sandbox).catch(() => {});
      throw error;
    }
  }

  private capsWritableLayers(): Promise<boolean> {
    this.capsLayers ??= this.docker.info().then(
      (info: { Driver?: string; DriverStatus?: Array<[string, string]> }) => mayCapWritableLayers(info),
      () => {
        this.capsLayers = undefined; // ask again next time
        return false;
      },
    );
    return this.capsLayers;
  }

  async start(id: string): Promise<void> {
    this.logger.debug("Starting container", { containerId: id });
    await this.onContainer(id, async () => {
      try {
        await ignoringStatus(NOT_MODIFIED, () => this.docker.getContainer(id).start());
      } catch (error) {
        // A start racing another (or one the engine was still finishing) can be
        // answered 500 "cannot start a stopped process" by a loaded engine while
        // the container runs: running is what was asked for.
        if (
          (
            await this.docker
              .getContainer(id)
              .inspect()
              .catch(() => undefined)
          )?.State?.Running
        )
          return;
        throw error;
      }
    });
  }

  async stop(id: string, timeoutS: number): Promise<void> {
    this.logger.debug("Stopping container", { containerId: id, timeoutS });
    await this.onContainer(id, () => ignoringStatus(NOT_MODIFIED, () => this.docker.getContainer(id).stop({ t: timeoutS })));
    this.logger.debug("Stopped container", { containerId: id });
  }

  async remove(id: string): Promise<void> {
    let labels: Record<string, string>;
    try {
      labels = (await this.docker.getContainer(id).inspect()).Config?.Labels ?? {};
    } catch (error) {
      if (dockerStatusCode(error) !== NOT_FOUND) throw error;
      this.logger.debug("Container already removed", { containerId: id });
      return;
    }
    this.logger.debug("Removing container", { containerId: id });
    try {
      await this.docker.getContainer(id).remove({ force: true, v: true });
    } catch (error) {
      if (![NOT_FOUND, CONFLICT].includes(dockerStatusCode(error) ?? 0)) throw error;
    }
    const sandbox = labels[LABEL_SANDBOX_NAME];
    const deploymentId = labels[LABEL_DEPLOYMENT_ID];
    if (sandbox) await this.sandboxes.remove(sandbox);
    else if (deploymentId) await this.removeNetworkIfUnused(deploymentNetworkName(deploymentId));
  }

  async inspect(id: string): Promise<ContainerState> {
    const info = await this.inspectRaw(id);
    const sandbox = info.Config?.Labels?.[LABEL_SANDBOX_NAME];
    return toContainerState(info, sandbox && info.State.Running ? await this.sandboxes.address(sandbox) : null);
  }

  async listManaged(filterLabels: Record<string, string> = {}): Promise<ContainerState[]> {
    const listed = await this.docker.listContainers({ all: true, filters: managedLabelFilter(filterLabels) });
    const states: ContainerState[] = [];
    for (const { Id } of listed) {
      try {
        states.push(await this.inspect(Id));
      } catch (error) {
        if (!(error instanceof ContainerNotFoundError)) throw error; // removed since the listing
      }
    }
    return states;
  }

  async waitExit(id: string): Promise<ContainerExit> {
    this.logger.debug("Waiting for container to exit", { containerId: id });
    const result = (await this.onContainer(id, () => this.docker.getContainer(id).wait())) as { StatusCode?: number };
    try {
      return toContainerExit(await this.inspectRaw(id));
    } catch (error) {
      if (!(error instanceof ContainerNotFoundError)) throw error;
      // Removed right after exiting: wait's status code is all we have.
      return { id, exitCode: result.StatusCode ?? -1, oomKilled: false, error: "" };
    }
  }

  private async inspectRaw(id: string): Promise<Docker.ContainerInspectInfo> {
    return this.onContainer(id, () => this.docker.getContainer(id).inspect());
  }

  /** Only for containers made before sandboxes, each with its deployment's own network. */
  private async removeNetworkIfUnused(name: string): Promise<void> {
    try {
      const network = this.docker.getNetwork(name);
      const info = (await network.inspect()) as { Containers?: Record<string, unknown> };
      if (Object.keys(info.Containers ?? {}).length > 0) {
        this.logger.debug("Network still in use, keeping it", { network: name });
        return;
      }
      this.logger.debug("Removing network", { network: name });
      await network.remove();
    } catch (error) {
      if (dockerStatusCode(error) !== NOT_FOUND) throw error;
    }
  }

  /** Runs a Docker call on container `id`, turning Docker's 404 into ContainerNotFoundError. */
  private async onContainer<T>(id: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (dockerStatusCode(error) === NOT_FOUND) throw new ContainerNotFoundError(id);
      throw error;
    }
  }
}

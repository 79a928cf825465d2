// Every container and network a test creates carries a label unique to its test
// file, so cleanup never touches anything else on the Docker engine.
import { randomUUID } from "node:crypto";
import Docker from "dockerode";

export const TEST_RUN_LABEL = "cm.test-run";

export interface DockerTestRun {
  docker: Docker;
  /** pass as ContainerSpec.labels */
  labels: Record<string, string>;
  /** unique ids for deployments, so network names never collide between test files */
  deploymentId(suffix: string): string;
  cleanup(): Promise<void>;
}

export function dockerTestRun(): DockerTestRun {
  const docker = new Docker();
  const runId = randomUUID().slice(0, 8);
  const filters = { label: [`${TEST_RUN_LABEL}=${runId}`] };
  return {
    docker,
    labels: { [TEST_RUN_LABEL]: runId },
    deploymentId: (suffix) => `test-${runId}-${suffix}`,
    async cleanup() {
      for (const container of await docker.listContainers({ all: true, filters })) {
        await docker
          .getContainer(container.Id)
          .remove({ force: true, v: true })
          .catch(() => {});
      }
      for (const network of await docker.listNetworks({ filters })) {
        await docker
          .getNetwork(network.Id)
          .remove()
          .catch(() => {});
      }
    },
  };
}

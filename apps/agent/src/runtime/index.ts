export type {
  ArchiveClient,
  ContainerClient,
  ContainerRuntime,
  EngineClient,
  EnsuredImage,
  EnsureImageOptions,
  ExecClient,
  ExecOptions,
  ExecProcess,
  ImageClient,
  LogClient,
  SandboxClient,
} from "./container-runtime";
export type { DockerRuntimeOptions } from "./docker-runtime";
export { DockerRuntime } from "./docker-runtime";
export { ContainerNotFoundError, ImageUnavailableError, PathNotFoundError } from "./errors";
export { deploymentNetworkName, LABEL_DEPLOYMENT_ID, LABEL_MANAGED, LABEL_NODE_ID, LABEL_USER_ID } from "./labels";
export type { RuntimeLogger } from "./logger";
export { silentLogger } from "./logger";
export type * from "./types";

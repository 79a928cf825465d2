// What a Reconciler is given (reconciler.ts), and what a convergence answers.
import type { DeploymentSpec } from "@cm/protocol";
import type { Clock } from "../clock";
import type { Logger } from "../logger";
import type { LogShipping } from "../logs/log-shipping";
import type { ContainerRuntime } from "../runtime/container-runtime";
import type { PullLimits } from "./pull-watch";
import type { NodeFacts } from "./start-deployment";
import type { StatusReporter } from "./status-reporter";

export type ConvergeResult = { ok: true } | { ok: false; error: string };

export interface ReconcilerOptions {
  runtime: ContainerRuntime;
  reporter: StatusReporter;
  logs: LogShipping;
  clock: Clock;
  logger: Logger;
  containerLabels: Record<string, string>;
  /** this agent's install (install-identity.ts), stamped on its containers; none without a state directory */
  installId?: () => string | undefined;
  containerStopTimeoutS: number;
  /** see StartContext.pullLimits */
  pullLimits?: PullLimits;
  /** see StartContext.checkRegistry */
  checkRegistry?(image: string): Promise<void>;
  nodeFacts(): Promise<NodeFacts>;
  /** whether log shipping can start now (the connection is ready) */
  canShipLogs(): boolean;
  /** see StartContext.admit */
  admit?(spec: DeploymentSpec): Promise<void>;
  /** see StartContext.diskDefaultGb */
  diskDefaultGb?: number;
  /** see StartContext.imageWithoutCommand */
  imageWithoutCommand?(image: string): void;
}

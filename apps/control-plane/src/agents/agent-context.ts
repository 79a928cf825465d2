import type { Repos } from "@cm/db";
import type { RegistryAuth } from "@cm/protocol";
import type { DatabaseHealth } from "../services/database-health";
import type { DeploymentMoves } from "../services/deployment-moves";
import type { EventBus } from "../services/events";
import type { Clock, IdGenerator } from "../services/ids";
import type { Logger } from "../services/logger";
import type { Metering } from "../services/metering";
import type { AgentSession } from "./agent-session";
import type { CommandWakes } from "./command-wakes";
import type { TemplateNeeds } from "./desired-state";
import type { HeartbeatBatch } from "./heartbeat-batch";
import type { TokenBucket } from "./log-limits";

/** What a session needs from the hub that owns it. */
export interface SessionHost {
  /** Makes the session the node's one connection, closing an older one with CLOSE_CODES.REPLACED. */
  adopt(session: AgentSession): void;
  onClosed(session: AgentSession): void;
  /** The node's agent cannot take what it is sent: shown offline until it is back. */
  notServing(nodeId: string, why: string): void;
  /** A session of the node's is ready now (this one, or a newer one). */
  isConnected(nodeId: string): boolean;
  /** A connection of the node's begins: what ran before it is charged again only from the agent's report (node-contact.ts). */
  connectionBegins(nodeId: string): Promise<void>;
  /** Runs fn after every earlier presence change of the node (online, lost), so they never interleave. */
  serialize<T>(nodeId: string, fn: () => Promise<T>): Promise<T>;
  readonly heartbeats: HeartbeatBatch;
  /** What the node may still store of its logs: one budget per node, whatever its connections (see log-limits.ts). */
  logBudget(nodeId: string): TokenBucket;
  templateNeeds(): Promise<ReadonlyMap<string, TemplateNeeds>>;
}

export type AgentContext = {
  repos: Repos;
  clock: Clock;
  ids: IdGenerator;
  events: EventBus;
  log: Logger;
  metering: Metering;
  /** How a status report moves its deployment. */
  moves: DeploymentMoves;
  dbHealth: DatabaseHealth;
  hub: SessionHost;
  /** Where each command's time from its move to the agent is recorded (/metrics). */
  commandWakes: CommandWakes;
  heartbeatIntervalMs: number;
  /** LOST_RETENTION_S, in ms: how long a lost node's returning agent keeps an ended deployment's stopped container */
  lostRetentionMs: number;
  helloTimeoutMs: number;
  maxFrameBytes: number;
  /** Log text (plus a per-line overhead) one node's connection may store per second, on average. */
  logIngestBytesPerS: number;
  /** A stored registry login, opened for one start command; absent or undefined: the image is pulled anonymously. */
  registryAuth?: (credentialId: string) => Promise<RegistryAuth | undefined>;
};

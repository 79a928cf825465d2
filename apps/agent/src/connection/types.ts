// The connection's vocabulary: its states, what it tells the agent, what it needs.
import type { ServerFrame } from "@cm/protocol";
import type { Clock } from "../clock";
import type { Timing } from "../config";
import type { Logger } from "../logger";
import type { SocketFactory } from "./socket";

export type ConnectionState = "disconnected" | "connecting" | "authenticating" | "ready" | "backoff" | "failed";
export type Welcome = Extract<ServerFrame, { type: "welcome" }>;

export interface ConnectionFailure {
  closeCode: number;
  reason: string;
  /** one readable sentence for the operator */
  explanation: string;
}

export interface ConnectionHandlers {
  onReady(welcome: Welcome): void;
  /** every parsed frame but welcome, only while ready */
  onFrame(frame: ServerFrame): void;
  /** the socket that was ready is gone (a reconnect may follow) */
  onDown(): void;
  /** a close code said not to retry; the connection stays in `failed` */
  onFailed(failure: ConnectionFailure): void;
  /** ids of the deployments whose containers run now, for the heartbeat */
  runningDeployments(): string[];
}

export interface ConnectionOptions {
  url: string;
  token: string;
  agentVersion: string;
  timing: Pick<Timing, "backoffInitialMs" | "backoffMaxMs" | "stableConnectionMs" | "helloTimeoutMs" | "pingIntervalMs" | "pongTimeoutMs">;
  socketFactory: SocketFactory;
  clock: Clock;
  logger: Logger;
  random?: () => number;
  /** status reports kept while disconnected */
  outboxMaxFrames?: number;
}

import { EventEmitter } from "node:events";
import type { DeploymentRow } from "@cm/db";
import type { ArchiveErrorCode } from "@cm/protocol";

/** In-process notices between the API and the agent sessions. */
type Events = {
  "deployment-changed": [DeploymentRow];
  /** Something a tenant reads of the deployment changed without a move (its cost, endpoint readiness, pull progress): listeners read it again. */
  "deployment-touched": [string];
  /** Log lines of the deployment were stored. */
  "logs-stored": [string];
  "node-retired": [string];
  /** Anything a catalogue summary shows changed: status, inventory, slots. */
  "node-changed": [string];
  /** Every token of a sign-in (a token family) was revoked here: sign-out, or a refresh token used twice. */
  "family-revoked": [string];
  /** An agent could not open a tunnel: (tunnelId, nodeId, reason, and for an archive why: ArchiveErrorCode). */
  "tunnel-error": [string, string, string, ArchiveErrorCode | undefined];
};

export class EventBus extends EventEmitter<Events> {}

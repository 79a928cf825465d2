import { EventEmitter } from "node:events";
import type { DeploymentRow } from "@cm/db";

/** In-process notices between the API and the agent sessions. */
type Events = {
  "deployment-changed": [DeploymentRow];
  "node-retired": [string];
  /** Anything a catalogue summary shows changed: status, inventory, slots. */
  "node-changed": [string];
  /** An agent could not open a tunnel: (tunnelId, nodeId, reason). */
  "tunnel-error": [string, string, string];
};

export class EventBus extends EventEmitter<Events> {}

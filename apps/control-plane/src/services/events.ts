import { EventEmitter } from "node:events";
import type { DeploymentRow } from "@cm/db";

/** In-process notices between the API and the agent sessions. */
type Events = {
  "deployment-changed": [DeploymentRow];
  "node-retired": [string];
};

export class EventBus extends EventEmitter<Events> {}

// With AGENT_STATE_DIR set, the daemon keeps <dir>/status.json: its connection
// state, node and last failure, for `doctor` and for operators' own monitoring.
// Nothing in it is secret, and nothing is read back: Docker's labels and the
// control plane's cursors are all the agent needs to resume (beside them the
// directory holds only the install id, install-identity.ts).
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Clock } from "./clock";
import type { ConnectionState } from "./connection/connection";
import type { Logger } from "./logger";

export interface AgentStatus {
  pid: number;
  agentVersion: string;
  state: ConnectionState;
  /** epoch ms of the last state change */
  since: number;
  nodeId?: string;
  /** why the agent stopped retrying, when it did */
  failure?: string;
}

export const STATUS_FILE = "status.json";

export class StatusFile {
  private status: AgentStatus;
  private readonly path: string;

  constructor(
    dir: string,
    initial: Omit<AgentStatus, "since">,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.path = join(dir, STATUS_FILE);
    this.status = { ...initial, since: clock.now() };
    mkdirSync(dir, { recursive: true });
    this.write();
  }

  update(change: Partial<Omit<AgentStatus, "since">>): void {
    const stateChanged = change.state !== undefined && change.state !== this.status.state;
    this.status = { ...this.status, ...change, ...(stateChanged ? { since: this.clock.now() } : {}) };
    this.write();
  }

  private write(): void {
    try {
      // Written whole, then renamed: a reader never sees half a file.
      writeFileSync(`${this.path}.tmp`, `${JSON.stringify(this.status, null, 2)}\n`, { mode: 0o644 });
      renameSync(`${this.path}.tmp`, this.path);
    } catch (error) {
      this.logger.warn("Cannot write the agent's status file", { path: this.path, error });
    }
  }
}

export function readStatusFile(dir: string): AgentStatus | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, STATUS_FILE), "utf8")) as AgentStatus;
  } catch {
    return undefined;
  }
}

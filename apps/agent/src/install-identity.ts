// Which install of the agent this is: a random id kept in the state directory
// (AGENT_STATE_DIR/install-id), stamped on every container, sandbox and network
// the agent creates (label cm.install-id). The node id says which enrolment made
// an object; the install id says which agent on this Docker engine did. A machine
// enrolled again as a new node keeps its state directory, so the new node's agent
// recognises what the old node left and removes it; agents of other installs on
// the same engine (other state directories) have other ids and are left alone.
//
// Two agents sharing one state directory (two nodes on one machine, configured by
// copying one env file) would each take the other's containers for an old
// enrolment's. So a running agent holds the directory (AGENT_STATE_DIR/agent.lock,
// its pid and the kernel's start time of that process, which a reused pid does
// not share); an agent that finds it held by a live agent goes without an install
// id: it removes nothing another node left, and says so.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "./logger";

export const INSTALL_ID_FILE = "install-id";
export const LOCK_FILE = "agent.lock";
const INSTALL_ID = /^ins_[0-9a-f]{24}$/;

export interface InstallClaim {
  /** undefined when the directory cannot be used or another live agent holds it */
  installId: string | undefined;
  /** Lets the next agent have the directory (the agent's stop()). */
  release(): void;
}

/** Holds `stateDir` for this agent and reads (or makes) its install id. Never throws. */
export function claimInstall(stateDir: string, logger: Logger): InstallClaim {
  const lockPath = join(stateDir, LOCK_FILE);
  const ours = `${process.pid} ${processStartTicks(process.pid) ?? ""}\n`;
  const unclaimed = { installId: undefined, release: () => {} };
  try {
    mkdirSync(stateDir, { recursive: true });
    if (!takeLock(lockPath, ours)) {
      logger.warn(
        "Another running agent uses this state directory: give each agent its own AGENT_STATE_DIR. Until then this one removes nothing an earlier enrolment left",
        { stateDir, holder: readOr(lockPath, "").trim() },
      );
      return unclaimed;
    }
  } catch (error) {
    logger.warn("Cannot use the state directory; containers an earlier enrolment of this machine left will not be recognised", { stateDir, error });
    return unclaimed;
  }
  const release = () => {
    try {
      if (readOr(lockPath, "") === ours) unlinkSync(lockPath);
    } catch {
      // gone already, or the directory went away: nothing to let go of
    }
  };
  const installId = loadInstallId(stateDir, logger);
  return { installId, release };
}

/**
 * The install id in `stateDir`, made the first time. Undefined (and a warning)
 * when the directory cannot be used or holds something else.
 */
export function loadInstallId(stateDir: string, logger: Logger): string | undefined {
  const path = join(stateDir, INSTALL_ID_FILE);
  try {
    const existing = readExisting(path);
    if (existing) return existing;
    mkdirSync(stateDir, { recursive: true });
    const id = `ins_${randomBytes(12).toString("hex")}`;
    try {
      writeFileSync(path, `${id}\n`, { mode: 0o644, flag: "wx" }); // two agents starting at once: one id wins
      logger.info("This agent's install id is new", { installId: id, path });
      return id;
    } catch (error) {
      const raced = (error as NodeJS.ErrnoException).code === "EEXIST" ? readExisting(path) : undefined;
      if (raced) return raced;
      throw error;
    }
  } catch (error) {
    logger.warn("Cannot keep an install id in the state directory; containers an earlier enrolment of this machine left will not be recognised", {
      path,
      error,
    });
    return undefined;
  }
}

/** True when the lock is now ours: it was free, or its holder is no longer running. */
function takeLock(path: string, ours: string): boolean {
  try {
    writeFileSync(path, ours, { mode: 0o644, flag: "wx" });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const [pid, ticks] = readOr(path, "").trim().split(" ");
  if (ticks && processStartTicks(Number(pid)) === ticks) return false;
  writeFileSync(path, ours, { mode: 0o644 }); // its holder died without letting go
  return true;
}

/** When the process started, in clock ticks since boot (Linux /proc); undefined when unknown or not running. */
function processStartTicks(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const stat = readOr(`/proc/${pid}/stat`, "");
  // Fields after the command name, which may hold spaces: state is field 3, starttime field 22.
  return stat ? stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] : undefined;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return fallback;
  }
}

function readExisting(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8").trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  if (!INSTALL_ID.test(text)) throw new Error(`${path} does not hold an install id (ins_ and 24 hex digits)`);
  return text;
}

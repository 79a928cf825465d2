// Which install of the agent this is: a random id kept in the state directory
// (AGENT_STATE_DIR/install-id), stamped on every container, sandbox and network
// the agent creates (label cm.install-id). The node id says which enrolment made
// an object; the install id says which agent on this Docker engine did. A machine
// enrolled again as a new node keeps its state directory, so the new node's agent
// recognises what the old node left and removes it; agents of other installs on
// the same engine (other state directories) have other ids and are left alone.
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "./logger";

export const INSTALL_ID_FILE = "install-id";
const INSTALL_ID = /^ins_[0-9a-f]{24}$/;

/**
 * The install id in `stateDir`, made the first time. Undefined when the
 * directory cannot be used: the agent then recognises nothing a previous
 * enrolment left, as before installs had ids.
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
    logger.warn("Cannot keep an install id in the state directory; containers a previous enrolment of this machine left will not be recognised", { path, error });
    return undefined;
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

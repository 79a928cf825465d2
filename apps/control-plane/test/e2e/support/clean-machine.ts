// A clean machine's PATH for the release tests: the plain system tools the release's
// wrappers and installers use, and nothing else (no node, no npm, no tsx).
import { execFileSync } from "node:child_process";
import { symlinkSync } from "node:fs";
import { join } from "node:path";

/** What bin/* and install.sh use. */
export const INSTALL_TOOLS = [
  "bash",
  "sh",
  "uname",
  "sha256sum",
  "awk",
  "cut",
  "tr",
  "basename",
  "dirname",
  "mktemp",
  "tar",
  "gzip",
  "cat",
  "readlink",
  "mkdir",
  "rm",
  "mv",
  "ln",
  "cp",
  "chmod",
  "id",
  // the control plane's installer names the backup it takes before an upgrade with the time
  "date",
  // the agent's installer runs doctor with the env file's settings alone, as the service has them
  "env",
];

/** Links each of INSTALL_TOOLS (which must be here) and of `optional` (where this machine has it) into `bin`. */
export function linkTools(bin: string, optional: string[] = []): void {
  for (const tool of [...INSTALL_TOOLS, ...optional]) {
    // sbin too: root's PATH on a server has it, the test runner's may not.
    const found = execFileSync("bash", ["-c", `PATH="$PATH:/usr/sbin:/sbin" command -v ${tool} || true`], { encoding: "utf8" }).trim();
    if (found) symlinkSync(found, join(bin, tool));
    else if (INSTALL_TOOLS.includes(tool)) throw new Error(`${tool} is not installed`);
  }
}

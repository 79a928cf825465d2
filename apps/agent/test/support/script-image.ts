// An image whose CMD runs the shell script in the SCRIPT environment variable:
// tests of everything but the command itself run their image's own CMD, as templates do.
import { execFileSync } from "node:child_process";
import { ensureBusyboxImage, imageExists } from "./busybox-image";

export const SCRIPT_IMAGE = "cm-test-script:latest";

/** Builds SCRIPT_IMAGE from the local busybox image (no registry involved); returns its name. */
export function ensureScriptImage(): string {
  if (imageExists(SCRIPT_IMAGE)) return SCRIPT_IMAGE;
  const base = ensureBusyboxImage();
  // Concurrent builds from two test files are harmless: both produce the same image.
  execFileSync("docker", ["build", "-q", "-t", SCRIPT_IMAGE, "-"], {
    input: `FROM ${base}\nCMD ["sh", "-c", "eval \\"$SCRIPT\\""]\n`,
    env: { ...process.env, DOCKER_BUILDKIT: "0" },
    stdio: ["pipe", "ignore", "pipe"],
  });
  return SCRIPT_IMAGE;
}

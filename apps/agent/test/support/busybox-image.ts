// No registry is reachable from CI or the dev VM, so tests build their own tiny
// image from the host's static busybox: a rootfs of /bin/busybox plus one
// symlink per applet, imported with `docker import`.
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const BUSYBOX_IMAGE = "cm-test-busybox:latest";
const HOST_BUSYBOX = "/bin/busybox";

export function imageExists(ref: string): boolean {
  try {
    execFileSync("docker", ["image", "inspect", ref], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

const LOCK_DIR = join(tmpdir(), "cm-test-busybox-image.lock");
// A build takes a few seconds. The wait below is synchronous (callers need the name
// at once) and holds this worker's event loop; vitest fails the run after 60 s of
// that, so a lock left by a killed run is taken over well before.
const STALE_LOCK_MS = 15_000;

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** mkdir is atomic: the one test process that creates the lock builds, the others wait. */
function withBuildLock(build: () => void): void {
  for (;;) {
    try {
      mkdirSync(LOCK_DIR);
      break;
    } catch {
      if (imageExists(BUSYBOX_IMAGE)) return;
      const ageMs = Date.now() - (statSync(LOCK_DIR, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (ageMs > STALE_LOCK_MS) rmSync(LOCK_DIR, { recursive: true, force: true });
      sleepSync(100);
    }
  }
  try {
    if (!imageExists(BUSYBOX_IMAGE)) build();
  } finally {
    rmSync(LOCK_DIR, { recursive: true, force: true });
  }
}

/** Builds BUSYBOX_IMAGE unless present; returns its name. Safe to call from parallel test files. */
export function ensureBusyboxImage(): string {
  if (!imageExists(BUSYBOX_IMAGE)) withBuildLock(buildBusyboxImage);
  return BUSYBOX_IMAGE;
}

function buildBusyboxImage(): void {
  const rootfs = mkdtempSync(join(tmpdir(), "cm-busybox-rootfs-"));
  try {
    // mkdtemp makes 0700 and umask trims modes; the image's / and /tmp need the usual ones.
    chmodSync(rootfs, 0o755);
    mkdirSync(join(rootfs, "bin"));
    mkdirSync(join(rootfs, "tmp"));
    chmodSync(join(rootfs, "tmp"), 0o1777);
    copyFileSync(HOST_BUSYBOX, join(rootfs, "bin/busybox"));
    const applets = execFileSync(HOST_BUSYBOX, ["--list"], { encoding: "utf8" }).split("\n").filter(Boolean);
    for (const applet of applets) {
      if (applet !== "busybox") symlinkSync("busybox", join(rootfs, "bin", applet));
    }
    execFileSync("bash", ["-c", `tar -c -C "$1" . | docker import -c 'ENV PATH=/bin' - "$2"`, "import", rootfs, BUSYBOX_IMAGE], {
      stdio: ["ignore", "ignore", "pipe"],
    });
  } finally {
    rmSync(rootfs, { recursive: true, force: true });
  }
}

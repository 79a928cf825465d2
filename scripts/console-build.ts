/**
 * The web console's build (apps/console, Vite) for the programs that need it built: `npm start`,
 * the control plane's release, and the console's browser tests. Built only when missing or older
 * than its sources (the console's, the SDK's and the protocol's), so a start after the first
 * costs a few file stats, not a build.
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const CONSOLE_ROOT = path.join(ROOT, "apps/console");
export const CONSOLE_DIST = path.join(CONSOLE_ROOT, "dist");

/** What the built console is made of: a change to any of them means a new build. */
const INPUTS = [
  "apps/console/src",
  "apps/console/index.html",
  "apps/console/vite.config.ts",
  "apps/console/package.json",
  "packages/sdk/src",
  "packages/protocol/src",
];

function newestMtimeMs(file: string): number {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs; // a deleted file changes its folder's time
  for (const entry of fs.readdirSync(file)) newest = Math.max(newest, newestMtimeMs(path.join(file, entry)));
  return newest;
}

/** Why the console in apps/console/dist needs building, or undefined when it is as new as its sources. */
export function consoleStaleness(dist = CONSOLE_DIST): string | undefined {
  const built = fs.statSync(path.join(dist, "index.html"), { throwIfNoEntry: false });
  if (!built) return "it is not built";
  const newest = Math.max(...INPUTS.map((p) => newestMtimeMs(path.join(ROOT, p))));
  return newest > built.mtimeMs ? "its sources changed since it was built" : undefined;
}

/** Builds the console into `outDir` (apps/console/dist by default) with Vite, in this process. */
export async function buildConsole(outDir = CONSOLE_DIST): Promise<void> {
  const { build } = await import("vite");
  await build({ root: CONSOLE_ROOT, configFile: path.join(CONSOLE_ROOT, "vite.config.ts"), logLevel: "warn", build: { outDir, emptyOutDir: true } });
}

/**
 * Builds the console when it is missing or stale; answers whether it built. Several processes
 * (test files run in parallel) may ask at once: one builds while the others wait on a lock
 * folder, then find it fresh. The build goes to a folder of its own and replaces dist only
 * when whole, so a control plane serving dist meanwhile never sees half a build.
 */
export async function ensureConsoleBuilt(say: (line: string) => void = () => {}): Promise<boolean> {
  if (!consoleStaleness()) return false;
  const lock = path.join(CONSOLE_ROOT, ".build-lock");
  const started = Date.now();
  for (;;) {
    try {
      fs.mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      // A build takes seconds; a lock this old was left by a process that died building.
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 120_000 || Date.now() - started > 180_000) fs.rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    const why = consoleStaleness();
    if (!why) return false;
    say(`building the web console (${why})`);
    const fresh = `${CONSOLE_DIST}.new-${process.pid}`;
    const old = `${CONSOLE_DIST}.old-${process.pid}`;
    await buildConsole(fresh);
    if (fs.existsSync(CONSOLE_DIST)) fs.renameSync(CONSOLE_DIST, old);
    fs.renameSync(fresh, CONSOLE_DIST);
    fs.rmSync(old, { recursive: true, force: true });
    return true;
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

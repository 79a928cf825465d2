import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Session, SessionStore } from "@cm/sdk";

/** `$XDG_CONFIG_HOME/cm` (default ~/.config/cm): where sessions are kept. */
export function configDir(env: NodeJS.ProcessEnv): string {
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "cm");
}

/**
 * One session per API URL, in a file only its owner reads (0600, in a 0700
 * folder): a refresh token is as good as the keypair until it expires.
 */
export class FileSessionStore implements SessionStore {
  readonly path: string;
  constructor(
    readonly dir: string,
    apiUrl: string,
  ) {
    this.path = join(dir, "sessions", `${apiUrl.replace(/^https?:\/\//, "").replace(/[^A-Za-z0-9.-]+/g, "_")}.json`);
  }

  load(): Session | undefined {
    try {
      return JSON.parse(readFileSync(this.path, "utf8")) as Session;
    } catch {
      return undefined;
    }
  }

  save(session: Session): void {
    const folder = join(this.dir, "sessions");
    mkdirSync(folder, { recursive: true, mode: 0o700 });
    chmodSync(folder, 0o700);
    // Written whole, then renamed: a reader never sees half a file.
    const partial = `${this.path}.${process.pid}.tmp`;
    writeFileSync(partial, JSON.stringify(session), { mode: 0o600 });
    renameSync(partial, this.path);
  }

  clear(): void {
    rmSync(this.path, { force: true });
  }
}

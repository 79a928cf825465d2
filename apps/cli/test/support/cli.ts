import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import nacl from "tweetnacl";

export const ROOT = resolve(import.meta.dirname, "../../../..");
export const TSX = join(ROOT, "node_modules/.bin/tsx");
export const ENTRY = join(ROOT, "apps/cli/src/index.ts");

export type CliResult = { code: number; stdout: string; stderr: string };

/**
 * A terminal of its own: a temporary HOME (so ~/.config/cm and the default
 * keypair path are its own) and the real `cm` run as a subprocess.
 */
export function terminal(env: Record<string, string> = {}) {
  const home = mkdtempSync(join(tmpdir(), "cm-cli-"));
  const base = { PATH: process.env.PATH ?? "", HOME: home, XDG_CONFIG_HOME: join(home, ".config"), NO_COLOR: "1", ...env };

  function cm(args: string[], extraEnv: Record<string, string> = {}, timeoutMs = 120_000): Promise<CliResult> {
    return new Promise((done) => {
      execFile(TSX, [ENTRY, ...args], { cwd: ROOT, env: { ...base, ...extraEnv }, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        done({ code, stdout, stderr });
      });
    });
  }

  /** Writes a fresh keypair in the Solana CLI's format; answers its wallet address and secret key. */
  function keypair(path = join(home, ".config/solana/id.json")) {
    const kp = nacl.sign.keyPair();
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(path, JSON.stringify([...kp.secretKey]));
    return { path, secretKey: kp.secretKey, publicKey: kp.publicKey };
  }

  return { home, cm, keypair, close: () => rmSync(home, { recursive: true, force: true }) };
}

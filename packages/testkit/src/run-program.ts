// Tests run docker, pg_ctl, tar and the like through this rather than
// execFileSync: a synchronous child holds the worker's event loop for as long
// as it runs, and past 60 s vitest fails the whole run (see loop-watch.ts).
// Quick local commands that cannot hang (id, ldd, cat) may stay synchronous.
import { execFile } from "node:child_process";

export interface RunProgramOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** written to the program's stdin, which is closed either way (as execFileSync does) */
  readonly input?: string | Buffer;
  /** past this the program is killed and the promise rejects; under the hooks' 120 s so a hung one fails its own test */
  readonly timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 90_000;

/**
 * Runs a program and resolves to its stdout as text. Rejects when it exits
 * other than 0 (the error's message carries its stderr, as execFileSync's does)
 * or outlives timeoutMs.
 */
export function runProgram(file: string, args: readonly string[] = [], options: RunProgramOptions = {}): Promise<string> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      { cwd: options.cwd, env: options.env, timeout: timeoutMs, killSignal: "SIGKILL", maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (error, stdout, stderr) => {
        if (!error) return resolve(stdout);
        if (error.killed && error.signal === "SIGKILL") {
          return reject(new Error(`${[file, ...args].join(" ")} did not finish within ${timeoutMs} ms${stderr ? `\n${stderr}` : ""}`));
        }
        reject(error);
      },
    );
    child.stdin?.on("error", () => undefined); // a program that exits without reading its input
    child.stdin?.end(options.input);
  });
}

/**
 * A self-signed certificate and its key (RSA 2048, one day), made by the real
 * openssl, as a TLS test's server uses them: `subjectAltName` as openssl takes
 * it (`DNS:a.test,DNS:*.b.test,IP:127.0.0.1`).
 */
export async function selfSignedCertificate(o: { cert: string; key: string; commonName: string; subjectAltName: string }): Promise<void> {
  await runProgram("openssl", [
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    `/CN=${o.commonName}`,
    "-addext",
    `subjectAltName=${o.subjectAltName}`,
    "-keyout",
    o.key,
    "-out",
    o.cert,
  ]);
}

// The pieces of the machine that some tests need beyond Node, and how to tell
// whether each is there. Probed once per run (global-setup.ts), never per test:
// a newcomer's run must not spend a timeout in every file to find out.
//
// A probe says "missing" only when the piece does not answer at all (no socket,
// connection refused, no binary). A piece that answers but misbehaves counts as
// present, so its tests run and fail: that is a fault to see, not a skip.
import { accessSync, constants } from "node:fs";
import { request } from "node:http";
import { delimiter, join } from "node:path";
import { testPostgresUrl } from "@cm/db/testing";
import postgres from "postgres";

export const PIECES = [
  "docker",
  "busybox",
  "postgres",
  "postgres-server",
  "nginx",
  "openssl",
  "qemu-aarch64",
  "cross-arm64",
  "systemd-analyze",
  "firewall",
  "registry",
  "ssh",
  "chromium",
] as const;
export type Piece = (typeof PIECES)[number];

/** The task meta key under which a skipped test or suite keeps why (needs.ts writes it, skip-summary.ts reads it). */
export const SKIPPED_FOR = "skippedFor";

/** For each piece that is missing, why, in words a newcomer can act on. */
export type MissingPieces = Partial<Record<Piece, string>>;

export const dockerHost = (env: NodeJS.ProcessEnv = process.env): string => env.DOCKER_HOST ?? "unix:///var/run/docker.sock";

/** Where initdb and pg_ctl are, for tests that run a PostgreSQL cluster of their own. */
export const postgresBin = (env: NodeJS.ProcessEnv = process.env): string => env.TEST_PG_BIN ?? "/usr/lib/postgresql/15/bin";

const PROBE_TIMEOUT_MS = 3_000;
/** Errors that mean nothing answered, as opposed to something answering badly. */
const NOTHING_THERE = new Set(["ENOENT", "ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "CONNECT_TIMEOUT", "EACCES"]);

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(command: string, env: NodeJS.ProcessEnv): boolean {
  return (env.PATH ?? "")
    .split(delimiter)
    .concat(["/usr/sbin", "/sbin"])
    .some((dir) => dir !== "" && executable(join(dir, command)));
}

async function probeDocker(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const host = dockerHost(env);
  const url = new URL(host);
  const target = url.protocol === "unix:" ? { socketPath: url.pathname } : { host: url.hostname, port: Number(url.port || 2375) };
  return new Promise((resolve) => {
    const req = request({ ...target, path: "/_ping", timeout: PROBE_TIMEOUT_MS }, (res) => {
      res.resume();
      resolve(undefined); // it answered; whatever it said, its tests run
    });
    req.on("timeout", () => req.destroy(Object.assign(new Error("timed out"), { code: "ETIMEDOUT" })));
    req.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code && NOTHING_THERE.has(error.code)) resolve(`no Docker engine answered at ${host} (${error.code})`);
      else resolve(undefined);
    });
    req.end();
  });
}

async function probePostgres(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const url = testPostgresUrl(env);
  const sql = postgres(url, { max: 1, connect_timeout: PROBE_TIMEOUT_MS / 1000, onnotice: () => undefined });
  let timer: NodeJS.Timeout | undefined;
  // Something that accepts the connection but never speaks PostgreSQL holds the
  // query forever: it answered, so it is present, and its tests will say what is wrong.
  const answeredOddly = new Promise<"odd">((resolve) => (timer = setTimeout(() => resolve("odd"), PROBE_TIMEOUT_MS)));
  try {
    await Promise.race([sql`select 1`, answeredOddly]);
    return undefined;
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code && NOTHING_THERE.has(code)) return `no PostgreSQL answered at ${redact(url)} (${code}; set TEST_POSTGRES_URL)`;
    return undefined; // it answered (a wrong password, a missing role): its tests fail and say so
  } finally {
    clearTimeout(timer);
    await sql.end({ timeout: 0 }).catch(() => undefined);
  }
}

function redact(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = "***";
  return parsed.toString();
}

function probeBinary(command: string, install: string, env: NodeJS.ProcessEnv): string | undefined {
  return onPath(command, env) ? undefined : `${command} is not installed (${install})`;
}

function probeFirewall(env: NodeJS.ProcessEnv): string | undefined {
  if (process.getuid?.() !== 0) return "not running as root (the egress policy's tests change the firewall and make network namespaces)";
  return probeBinary("iptables", "apt-get install iptables", env) ?? probeBinary("ip", "apt-get install iproute2", env);
}

/** Probes every piece at once; resolves to the missing ones with their reasons. */
export async function probePieces(env: NodeJS.ProcessEnv = process.env): Promise<MissingPieces> {
  const [docker, pg] = await Promise.all([probeDocker(env), probePostgres(env)]);
  const found: Record<Piece, string | undefined> = {
    docker,
    // Test images are a rootfs holding the host's static busybox (no registry here).
    busybox: executable("/bin/busybox") ? undefined : "/bin/busybox is not installed (apt-get install busybox-static)",
    postgres: pg,
    // The fault suite makes a cluster of its own (initdb, pg_ctl) to stop and start.
    "postgres-server": executable(join(postgresBin(env), "initdb"))
      ? undefined
      : `PostgreSQL's server programs are not in ${postgresBin(env)} (apt-get install postgresql-15, or set TEST_PG_BIN)`,
    nginx: probeBinary("nginx", "apt-get install nginx-light", env),
    openssl: probeBinary("openssl", "apt-get install openssl", env),
    "qemu-aarch64": executable("/usr/bin/qemu-aarch64-static") ? undefined : "qemu-aarch64-static is not installed (apt-get install qemu-user-static)",
    // The control plane's arm64 tarball carries better-sqlite3 cross-compiled for aarch64.
    "cross-arm64": probeBinary("aarch64-linux-gnu-g++", "apt-get install g++-aarch64-linux-gnu", env),
    "systemd-analyze": probeBinary("systemd-analyze", "apt-get install systemd", env),
    // The egress policy's tests change the host's firewall and make network namespaces.
    firewall: probeFirewall(env),
    // Private images are pushed to and pulled from a real registry (distribution 2.8) with htpasswd's bcrypt logins.
    registry: probeBinary("docker-registry", "apt-get install docker-registry", env) ?? probeBinary("htpasswd", "apt-get install apache2-utils", env),
    // cm ssh runs the real ssh client, its ProxyCommand cm port-forward --stdio.
    ssh: probeBinary("ssh", "apt-get install openssh-client", env),
    // The web console's browser tests drive Debian's chromium with playwright-core (no browser download).
    chromium: probeBinary("chromium", "apt-get install chromium", env),
  };
  const missing: MissingPieces = {};
  for (const piece of PIECES) if (found[piece]) missing[piece] = found[piece];
  return missing;
}

/**
 * `npm start`: the whole marketplace on one machine, on the embedded database.
 * Runs the control plane; when a Docker engine answers, it also enrols this
 * machine as a node (once, remembered in ./data/local-node.json) and runs its
 * agent, so a newcomer can deploy a container a minute after cloning.
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { openRepos } from "@cm/db";
import { Keypair } from "@solana/web3.js";
import { DockerRuntime } from "../apps/agent/src/runtime/docker-runtime";
import { loadConfigOrExit } from "../apps/control-plane/src/config";
import { DATA_DIR } from "../apps/control-plane/src/database-location";
import { hashSecret, newSecret, randomId } from "../apps/control-plane/src/services/ids";
import { ensureConsoleBuilt } from "./console-build";

const config = loadConfigOrExit("npm start");
// Beside the default database, from the repository root wherever npm start runs: the admin commands find them there too.
const localNodeFile = path.join(DATA_DIR, "local-node.json");
const children: ChildProcess[] = [];
const say = (line: string) => process.stdout.write(`[start] ${line}\n`);

async function dockerVersion(): Promise<string | undefined> {
  try {
    return await new DockerRuntime({ socketPath: process.env.DOCKER_SOCKET ?? "/var/run/docker.sock" }).engineVersion();
  } catch {
    return undefined;
  }
}

/** The local node's id and agent token, creating the node (and its operator) the first time. */
async function ensureLocalNode(): Promise<{ nodeId: string; token: string }> {
  const repos = await openRepos(config.DATABASE_URL);
  try {
    if (fs.existsSync(localNodeFile)) {
      const saved = JSON.parse(fs.readFileSync(localNodeFile, "utf8")) as { nodeId: string; token: string };
      if (await repos.nodes.byAgentTokenHash(hashSecret(saved.token))) return saved;
    }
    const now = Date.now();
    const operator = await repos.auth.upsertUser(randomId("usr"), Keypair.generate().publicKey.toBase58(), now);
    await repos.auth.setOperator(operator.id);
    const token = newSecret("cmn");
    const node = await repos.nodes.create({
      id: randomId("node"),
      operatorId: operator.id,
      name: "this machine",
      region: "us-east",
      country: "US",
      hourlyRateCents: 10,
      maxDeployments: 8,
      agentTokenHash: hashSecret(token),
      createdAt: now,
    });
    fs.mkdirSync(path.dirname(localNodeFile), { recursive: true });
    fs.writeFileSync(localNodeFile, JSON.stringify({ nodeId: node.id, token }, null, 2), { mode: 0o600 });
    say(`enrolled this machine as node ${node.id}`);
    return { nodeId: node.id, token };
  } finally {
    await repos.handle.close();
  }
}

async function waitForHealth(url: string, timeoutMs: number) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    try {
      if ((await fetch(`${url}/health`)).ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

function run(name: string, args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, ["--import", "tsx", ...args], { stdio: "inherit", env });
  children.push(child);
  child.on("exit", (code, signal) => {
    say(`${name} exited (${signal ?? code})`);
    shutdown("SIGTERM", code ?? 1);
  });
}

let stopping = false;
function shutdown(signal: NodeJS.Signals, code = 0) {
  if (stopping) return;
  stopping = true;
  for (const c of children) if (c.exitCode === null) c.kill(signal);
  setTimeout(() => process.exit(code), 5_000).unref();
  Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once("exit", r))))).then(() => process.exit(code));
}
process.on("SIGINT", () => shutdown("SIGINT"));
process.on("SIGTERM", () => shutdown("SIGTERM"));

// The web console the control plane serves under /app/: built the first time and after its sources change (seconds), else nothing to do.
try {
  await ensureConsoleBuilt(say);
} catch (error) {
  say(`the web console did not build, so /app/ says how to build it; the API runs all the same: ${(error as Error).message}`);
}
const docker = await dockerVersion();
const local = docker ? await ensureLocalNode() : undefined;
run("control plane", ["apps/control-plane/src/index.ts"], process.env);
const url = `http://${config.HOST === "0.0.0.0" ? "127.0.0.1" : config.HOST}:${config.PORT}`;
if (!docker) {
  say("no Docker engine answered at /var/run/docker.sock: running the control plane without a local node");
} else if (local && (await waitForHealth(url, 30_000))) {
  say(`Docker ${docker} found: starting the agent for node ${local.nodeId}`);
  // The state directory keeps the agent's install id: enrolled again (a new database), it removes what the old node left.
  const stateDir = path.join(path.dirname(localNodeFile), "agent");
  // The egress policy needs root (iptables); without it the agent would refuse every deployment. A development
  // machine's own node goes without, and says so, unless AGENT_EGRESS_POLICY is set.
  const egress = process.env.AGENT_EGRESS_POLICY ?? (process.getuid?.() === 0 ? "on" : "off");
  if (egress === "off") say("not root: the local node runs without the egress policy (its containers can reach this machine and its network)");
  run("agent", ["apps/agent/src/index.ts"], {
    ...process.env,
    CONTROL_PLANE_URL: url,
    AGENT_TOKEN: local.token,
    AGENT_STATE_DIR: stateDir,
    AGENT_EGRESS_POLICY: egress,
  });
}

import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { needs, sqliteDatabase } from "@cm/testkit";
import { Keypair, PublicKey } from "@solana/web3.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { removeLabelled, type System, startSystem, until } from "../../control-plane/test/e2e/support/system";
import { ensureWebImage } from "../../control-plane/test/e2e/support/web-image";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../../control-plane/test/support/fake-solana-rpc";
import { USDC_DECIMALS, USDC_MINT } from "../../control-plane/test/support/solana-fixtures";
import { terminal } from "./support/cli";

// `cm` end to end: a real control plane, a real agent driving Docker, and the CLI as a
// tenant runs it: login, credits buy (USDC through the tests' Solana RPC), deploy --wait,
// logs, logs -f until the deployment ends, stop, rm.

needs("docker", "busybox").describe("cm with a real agent and Docker", () => {
  let s: System;
  let rpc: FakeSolanaRpc;
  let t: ReturnType<typeof terminal>;
  let image: string;
  let id = "";

  beforeAll(async () => {
    image = ensureWebImage();
    rpc = await startFakeSolanaRpc();
    s = await startSystem(sqliteDatabase, {
      TREASURY_WALLET: Keypair.generate().publicKey.toBase58(),
      SOLANA_RPC_URL: rpc.url,
      STABLE_MINT: USDC_MINT.toBase58(),
    });
    await s.agent().start();
    t = terminal({ CM_API_URL: s.h.url, SOLANA_RPC_URL: rpc.url });
    const wallet = new PublicKey(t.keypair().publicKey);
    rpc.fundTokenAccount({ owner: wallet, mint: USDC_MINT, decimals: USDC_DECIMALS, amountBaseUnits: 1_000_000_000n });
    expect((await t.cm(["login"])).code).toBe(0);
    const [pkg] = JSON.parse((await t.cm(["credits", "packages", "--json"])).stdout).packages;
    const bought = await t.cm(["credits", "buy", pkg.id]);
    expect(bought.code, bought.stderr).toBe(0);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
  }, 180_000);
  afterAll(async () => {
    t?.close();
    await s?.close();
    await rpc?.close();
  }, 60_000);

  it("deploy --wait shows the status changes and ends at running with the endpoints", async () => {
    const r = await t.cm(["deploy", "--image", image, "--port", "8080", "--node", s.nodeId, "--name", "web", "--wait"]);
    expect(r.code, r.stderr).toBe(0);
    id = r.stdout.trim();
    expect(id).toMatch(/^dep_/);
    const lines = r.stderr.split("\n");
    expect(lines[0]).toMatch(new RegExp(`^Created ${id} on ${s.nodeId}, 36¢/h\\.$`));
    expect(lines.some((l) => / {2}\d\d:\d\d:\d\d {2}pending$/.test(l))).toBe(true);
    expect(lines.some((l) => / {2}\d\d:\d\d:\d\d {2}running$/.test(l))).toBe(true);
    expect(r.stderr).toMatch(/ {2}https?:\/\/\S+ -> 8080/);
    expect(JSON.parse((await t.cm(["show", id, "--json"])).stdout).deployment.status).toBe("running");
  });

  it("logs prints the container's lines; --json the API's answer", async () => {
    await until("a tick logged", async () => (await t.cm(["logs", id, "--tail", "3"])).stdout.includes("tick"));
    const json = JSON.parse((await t.cm(["logs", id, "--json", "--tail", "2"])).stdout);
    expect(json.logs).toHaveLength(2);
    expect(json.logs[0]).toMatchObject({ stream: "stdout", message: expect.stringMatching(/^tick \d+$/) });
  });

  it("logs -f follows new lines and ends by itself once the deployment is stopped", async () => {
    const following = t.cm(["logs", id, "-f", "--tail", "1"]);
    // Let it print a few new ticks (one every 200 ms), then stop the deployment.
    await new Promise((r) => setTimeout(r, 4_000));
    const stop = await t.cm(["stop", id]);
    expect(stop.code, stop.stderr).toBe(0);
    const followed = await following;
    expect(followed.code, followed.stderr).toBe(0);
    const ticks = followed.stdout
      .trim()
      .split("\n")
      .filter((l) => l.startsWith("tick"))
      .map((l) => Number(l.slice(5)));
    expect(ticks.length).toBeGreaterThan(3);
    // Each line once, in order: none lost or repeated between polls.
    expect(ticks).toEqual(ticks.map((_, i) => ticks[0]! + i));
    expect(JSON.parse((await t.cm(["show", id, "--json"])).stdout).deployment.status).toMatch(/^(stopped|exited)$/);
  });

  it("rm deletes it", async () => {
    expect(await t.cm(["rm", id])).toMatchObject({ code: 0, stderr: `deployment ${id} deleted.\n` });
    expect((await t.cm(["ls", "--json"])).stdout).not.toContain(id);
  });

  it("deploy --wait exits 1 with the reason when the deployment fails", async () => {
    const r = await t.cm(["deploy", "--image", "cm-test-does-not-exist:1", "--node", s.nodeId, "--wait"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/\nerror DEPLOYMENT_ENDED: deployment dep_\S+ is failed: .+\n$/);
  });

  it("operator add prints the one command that brings the node online", async () => {
    const op = terminal({ CM_API_URL: s.h.url });
    op.keypair();
    expect((await op.cm(["login"])).code).toBe(0);
    const add = await op.cm(["operator", "add", "--name", "from-cli", "--region", "eu-west", "--country", "DE", "--rate", "10", "--max", "1"]);
    expect(add.code, add.stderr).toBe(0);
    const [nodeId, install] = add.stdout.trim().split("\n");
    expect(install).toMatch(/^AGENT_TOKEN=(cmn_\S+) sudo --preserve-env=AGENT_TOKEN bash install-cm-agent\.sh --control-plane \S+$/);
    // cm runs from a checkout here, so it also says how to run the agent from one: the foreground form, as pasted.
    const command = /\(or in the foreground: (AGENT_TOKEN=cmn_\S+ npm run agent -- --control-plane \S+)\)/.exec(add.stderr)?.[1];
    expect(command, add.stderr).toBeDefined();
    const token = /^AGENT_TOKEN=(\S+) /.exec(command!)![1]!;
    const state = mkdtempSync(join(tmpdir(), "cm-agent-state-"));
    // The printed line as an operator pastes it into a shell (typed on its input, not given as
    // its argument); no warm sandboxes, so the node's containers are only its own.
    const agent = spawn("sh", ["-s"], {
      cwd: resolve(import.meta.dirname, "../../.."),
      env: { ...process.env, AGENT_STATE_DIR: state, AGENT_SANDBOX_POOL: "0", LOG_LEVEL: "warn" },
      detached: true,
      stdio: ["pipe", "ignore", "ignore"],
    });
    agent.stdin!.end(`${command}\n`);
    try {
      await until("the node online", async () => JSON.parse((await op.cm(["nodes", "show", nodeId!, "--json"])).stdout).node.status === "online", 90_000);
      // What `ps` shows every user of the machine: no process's arguments hold the token.
      expect(processesWithArgument(token)).toEqual([]);
      expect((await op.cm(["operator", "nodes"])).stdout).toMatch(new RegExp(`^${nodeId}\tfrom-cli\tonline\t`, "m"));
    } finally {
      if (agent.pid) process.kill(-agent.pid, "SIGTERM");
      await new Promise((done) => (agent.exitCode === null ? agent.once("exit", done) : done(undefined)));
      await removeLabelled(`cm.node-id=${nodeId}`);
      rmSync(state, { recursive: true, force: true });
      op.close();
    }
  }, 150_000);
});

/** The pids whose command line (what `ps` shows any user) contains `text`. */
function processesWithArgument(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(text)) pids.push(Number(entry));
    } catch {
      // the process ended meanwhile
    }
  }
  return pids;
}

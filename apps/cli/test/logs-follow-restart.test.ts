import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { creditsToMicro } from "@cm/db";
import { needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { SCRIPT_IMAGE } from "../../agent/test/support/script-image";
import { type FaultSystem, numberedLines, startFaultSystem, until } from "../../control-plane/test/faults/support/fault-system";
import { terminal } from "./support/cli";

// `cm logs -f` while the control plane restarts: the real CLI as a subprocess, the
// control plane in a process of its own on PostgreSQL (stopped and started again on
// the same port and database), a real agent and a container numbering its lines.
// The tenant sees every line once, before and after the restart, and the command
// keeps following until the deployment is stopped.

const ROOT = resolve(import.meta.dirname, "../../..");
const EVERY_S = 0.2;
const DOWN_MS = 1_500;

needs("docker", "busybox", "postgres-server").describe("cm logs -f across a control-plane restart", () => {
  let sys: FaultSystem;
  let t: ReturnType<typeof terminal>;
  let follower: ReturnType<typeof follow> | undefined;

  beforeAll(async () => {
    sys = await startFaultSystem({ heartbeatIntervalMs: 2_000 });
    await sys.startAgent();
    t = terminal({ CM_API_URL: sys.url });
    t.keypair();
    expect((await t.cm(["login"])).code).toBe(0);
    const userId = JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id as string;
    await sys.repos.handle.transaction((tx) =>
      sys.repos.ledger.post(tx, {
        id: `txn_cli_${Date.now()}`,
        userId,
        type: "deposit",
        amountMicro: creditsToMicro(100_000),
        description: "cli follow grant",
        createdAt: Date.now(),
      }),
    );
  }, 180_000);
  afterAll(async () => {
    follower?.kill();
    t?.close();
    await sys?.close();
  }, 60_000);

  it("prints every line once, from before and after the restart, and exits 0 when the deployment is stopped", async () => {
    const deployed = await t.cm(["deploy", "--image", SCRIPT_IMAGE, "--env", `SCRIPT=${numberedLines(EVERY_S)}`, "--node", sys.nodeId, "--wait"]);
    expect(deployed.code, deployed.stderr).toBe(0);
    const id = deployed.stdout.trim();

    follower = follow(id);
    const f = follower;
    await until(
      "lines followed before the restart",
      async () => f.numbers().length >= 5,
      30_000,
      async () => f.output(),
    );
    await sys.restartControlPlane(DOWN_MS);
    const lastBefore = f.numbers().at(-1)!;
    // Lines written while it was down and after it came back, all through the same command.
    await until(
      "lines followed after the restart",
      async () => (f.numbers().at(-1) ?? 0) > lastBefore + (DOWN_MS / 1000 / EVERY_S) * 2,
      60_000,
      async () => `${f.output()}\n${sys.cp.tail(20)}`,
    );
    expect(f.exited, "cm logs -f still following").toBe(false);

    expect((await t.cm(["stop", id])).code).toBe(0);
    const code = await f.done;
    expect(code, f.output()).toBe(0);

    const printed = f.numbers();
    // Each line once, in order: none lost or repeated across the restart.
    expect(printed).toEqual(printed.map((_, i) => printed[0]! + i));
    // And up to the last line the deployment wrote: what the API keeps, from where the command began.
    const stored = (JSON.parse((await t.cm(["logs", id, "--json", "--tail", "10000"])).stdout).logs as Array<{ message: string }>).map((l) =>
      Number(l.message),
    );
    expect(printed).toEqual(stored.slice(stored.indexOf(printed[0]!)));
    expect(printed.at(-1)).toBeGreaterThan(lastBefore);
  }, 180_000);

  /** `cm logs ID -f` in the test's terminal, its stdout read as it comes. */
  function follow(id: string) {
    const child = spawn(join(ROOT, "node_modules/.bin/tsx"), [join(ROOT, "apps/cli/src/index.ts"), "logs", id, "-f", "--tail", "1"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), NO_COLOR: "1", CM_API_URL: sys.url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    const state = { exited: false };
    const done = new Promise<number | null>((settle) =>
      child.once("exit", (code) => {
        state.exited = true;
        settle(code);
      }),
    );
    return {
      done,
      get exited() {
        return state.exited;
      },
      // Whole lines only: the last one may still be arriving.
      numbers: () => stdout.split("\n").slice(0, -1).map(Number),
      kill: () => state.exited || child.kill("SIGTERM"),
      output: () => `stdout:\n${stdout.slice(-2_000)}\nstderr:\n${stderr.slice(-2_000)}`,
    };
  }
});

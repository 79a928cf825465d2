import { spawn } from "node:child_process";
import { join, resolve } from "node:path";
import { needs, sqliteDatabase } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureScriptImage } from "../../agent/test/support/script-image";
import { type System, startSystem, until } from "../../control-plane/test/e2e/support/system";
import { type CliResult, terminal } from "./support/cli";

// `cm exec` as a tenant runs it, against a real control plane, a real agent and
// Docker: output, stdin from a pipe, exit codes, a shell in a pseudo-terminal.

const ROOT = resolve(import.meta.dirname, "../../..");
const TSX = join(ROOT, "node_modules/.bin/tsx");
const ENTRY = join(ROOT, "apps/cli/src/index.ts");

needs("docker", "busybox").describe("cm exec with a real agent and Docker", () => {
  let s: System;
  let t: ReturnType<typeof terminal>;
  let id = "";

  /** cm with `input` on its stdin (a pipe), as `printf ... | cm exec ...` would. */
  function cmWithInput(args: string[], input: string): Promise<CliResult> {
    return new Promise((done) => {
      const child = spawn(TSX, [ENTRY, ...args], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), CM_API_URL: s.h.url },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (c: Buffer) => (stdout += c));
      child.stderr.on("data", (c: Buffer) => (stderr += c));
      child.on("close", (code) => done({ code: code ?? -1, stdout, stderr }));
      child.stdin.end(input);
    });
  }

  beforeAll(async () => {
    ensureScriptImage();
    s = await startSystem(sqliteDatabase);
    await s.agent().start();
    t = terminal({ CM_API_URL: s.h.url });
    t.keypair();
    expect((await t.cm(["login"])).code).toBe(0);
    await s.h.grantCredits(JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id, 1_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    const r = await t.cm(["deploy", "--image", ensureScriptImage(), "--node", s.nodeId, "--env", "SCRIPT=sleep 3600", "--wait"]);
    expect(r.code, r.stderr).toBe(0);
    id = r.stdout.trim();
  }, 180_000);
  afterAll(async () => {
    t?.close();
    await s?.close();
  }, 60_000);

  it("prints the command's output and exits with its exit code", async () => {
    const r = await t.cm(["exec", id, "--", "sh", "-c", "echo hi; exit 3"]);
    expect(r).toEqual({ code: 3, stdout: "hi\n", stderr: "" });
  });

  it("pipes stdin to the command and keeps stderr apart from stdout", async () => {
    const r = await cmWithInput(["exec", id, "--", "sh", "-c", "tr a-z A-Z; echo to-stderr >&2"], "piped text\n");
    expect(r).toEqual({ code: 0, stdout: "PIPED TEXT\n", stderr: "to-stderr\n" });
  });

  it("reads a large stdin only as fast as the command takes it, and passes it all", async () => {
    // `cm exec ID -- sh -c 'cat > f' < big`: the file must not be read into cm's memory.
    const total = 128 * 1024 * 1024;
    const child = spawn(TSX, [ENTRY, "exec", id, "--", "sh", "-c", "echo ready; sleep 4; wc -c"], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), CM_API_URL: s.h.url },
    });
    let stdout = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c));
    const code = new Promise<number>((r) => child.on("close", (c) => r(c ?? -1)));
    const chunk = Buffer.alloc(1024 * 1024, 0xfe);
    for (let i = 0; i < total / chunk.length; i++) child.stdin.write(chunk);
    child.stdin.end();
    await until("the command started", async () => stdout.startsWith("ready\n"), 30_000);
    await new Promise((r) => setTimeout(r, 2_000));
    // What the command has not read yet is still waiting here, not in cm.
    expect(child.stdin.writableLength).toBeGreaterThan(total / 2);
    expect(await code).toBe(0);
    expect(stdout).toBe(`ready\n${total}\n`);
  }, 60_000);

  it("holds the command's output back while cm's stdout is not read (a slow pipe), then passes all of it", async () => {
    // `cm exec ID -- cat big | slow-reader`: the output must wait in the container, not pile up in cm.
    const total = 64 * 1024 * 1024;
    const child = spawn(TSX, [ENTRY, "exec", id, "--", "sh", "-c", `rm -f /tmp/wrote-all; head -c ${total} /dev/zero; touch /tmp/wrote-all`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), CM_API_URL: s.h.url },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const code = new Promise<number>((r) => child.on("close", (c) => r(c ?? -1)));
    const [container] = (await runProgram("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${id}`])).split("\n");
    const wroteAll = async () => {
      try {
        await runProgram("docker", ["exec", container!, "test", "-e", "/tmp/wrote-all"]);
        return true;
      } catch {
        return false;
      }
    };
    // Nothing reads cm's stdout for a while: its pipe fills, and then cm must stop taking output.
    await new Promise((r) => setTimeout(r, 6_000));
    expect(await wroteAll()).toBe(false);
    let received = 0;
    child.stdout.on("data", (c: Buffer) => (received += c.length));
    expect(await code).toBe(0);
    expect(received).toBe(total);
    expect(await wroteAll()).toBe(true);
  }, 90_000);

  it("-it gives a shell in a terminal sized like this one; what is typed is echoed, exit 5 is cm's exit code", async () => {
    // script(1) gives cm a pseudo-terminal of 100x30, as a terminal emulator would.
    const inner = `stty cols 100 rows 30; ${TSX} ${ENTRY} exec ${id} -it -- sh`;
    const r = await cmWithPty(inner, ["stty size\r", "echo typed-$((40+2))\r", "exit 5\r"]);
    expect(r.stdout).toContain("30 100");
    expect(r.stdout).toContain("echo typed-$((40+2))");
    expect(r.stdout).toContain("typed-42");
    expect(r.code).toBe(5);
  });

  it("says why it cannot: someone else's deployment, a stopped one (exit 1); no command or -t on a pipe (exit 2)", async () => {
    const other = terminal({ CM_API_URL: s.h.url });
    other.keypair();
    expect((await other.cm(["login"])).code).toBe(0);
    const theirs = await other.cm(["exec", id, "--", "true"]);
    expect(theirs.code).toBe(1);
    expect(theirs.stderr).toMatch(/^error DEPLOYMENT_NOT_FOUND: .+\n$/);
    other.close();

    const usage = await t.cm(["exec", id]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^error: missing CMD/);
    const piped = await cmWithInput(["exec", id, "-t", "--", "sh"], "");
    expect(piped.code).toBe(2);
    expect(piped.stderr).toMatch(/^error: -t needs a terminal/);

    expect((await t.cm(["stop", id])).code).toBe(0);
    const stopped = await t.cm(["exec", id, "--", "true"]);
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toMatch(/^error INVALID_STATE_TRANSITION: cannot exec in a deployment that is (stopping|stopped|exited)/);
  }, 60_000);

  /** Runs `command` under script(1), a pseudo-terminal, typing each of `keys` a moment apart. */
  function cmWithPty(command: string, keys: string[]): Promise<CliResult> {
    return new Promise((done) => {
      const env = { PATH: process.env.PATH ?? "", HOME: t.home, XDG_CONFIG_HOME: join(t.home, ".config"), CM_API_URL: s.h.url, TERM: "dumb" };
      const child = spawn("script", ["-qefc", command, "/dev/null"], { cwd: ROOT, env });
      let stdout = "";
      child.stdout.on("data", (c: Buffer) => (stdout += c));
      child.on("close", (code) => done({ code: code ?? -1, stdout, stderr: "" }));
      void (async () => {
        await until("the shell's prompt", async () => stdout.includes("# "), 30_000);
        for (const key of keys) {
          child.stdin.write(key);
          await new Promise((r) => setTimeout(r, 300));
        }
      })();
    });
  }
});

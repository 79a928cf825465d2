import { execFile } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { needs, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

// scripts/install-agent.sh as an operator runs it, against the real control plane: the token
// from a file named relative to where the operator stands (or from the environment), never
// on the command line; --dry-run writes the files where it is told and enables nothing.

const ROOT = resolve(import.meta.dirname, "../../../..");

needs("docker").describe("the agent installer with the token off the command line", () => {
  let h: Harness;
  let dir = "";
  let token = "";
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase);
    const op = await h.signIn();
    const r = await h.call("POST", "/operator/nodes", {
      token: op.token,
      body: { name: "installed", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 },
    });
    token = r.json.agentToken;
    dir = mkdtempSync(join(tmpdir(), "cm-install-script-"));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await h?.close();
  });

  // Not spawnSync: the control plane answering the doctor runs in this process.
  const install = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((done) =>
      execFile(
        "bash",
        [join(ROOT, "scripts/install-agent.sh"), ...args],
        { cwd: dir, encoding: "utf8", env: { PATH: process.env.PATH ?? "", HOME: dir, ...env }, timeout: 120_000 },
        (err, stdout, stderr) => done({ status: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
      ),
    );

  it("--token-file ./token (mode 0600) from the operator's directory: doctor accepts the token, the env file holds it, nothing is enabled", async () => {
    writeFileSync(join(dir, "token"), `${token}\n`);
    chmodSync(join(dir, "token"), 0o600);
    const r = await install(["--dry-run", "--control-plane", h.url, "--token-file", "./token", "--unit-dir", "unit", "--env-path", "etc/agent.env"]);
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain("✓ Token: accepted");
    expect(r.stdout).not.toContain("systemctl enable");
    expect(r.stderr).not.toContain("--token puts");
    expect(readFileSync(join(dir, "etc/agent.env"), "utf8")).toContain(`AGENT_TOKEN=${token}`);
    expect(statSync(join(dir, "etc/agent.env")).mode & 0o777).toBe(0o600);
    // The service runs the built agent on node alone, not the sources through tsx.
    const unit = readFileSync(join(dir, "unit/cm-agent.service"), "utf8");
    expect(unit).toMatch(/^ExecStart=\S*node \S*apps\/agent\/dist\/cm-agent\.mjs run$/m);
    expect(unit).not.toContain("tsx");
  }, 150_000);

  it("AGENT_TOKEN from the environment works the same; --token works with a warning", async () => {
    const fromEnv = await install(["--dry-run", "--control-plane", h.url, "--unit-dir", "unit", "--env-path", "etc/env2"], { AGENT_TOKEN: token });
    expect(fromEnv.status, `${fromEnv.stdout}\n${fromEnv.stderr}`).toBe(0);
    expect(fromEnv.stderr).not.toContain("--token puts");
    expect(readFileSync(join(dir, "etc/env2"), "utf8")).toContain(`AGENT_TOKEN=${token}`);
    const fromFlag = await install(["--dry-run", "--control-plane", h.url, "--token", token, "--unit-dir", "unit", "--env-path", "etc/env3"]);
    expect(fromFlag.status, `${fromFlag.stdout}\n${fromFlag.stderr}`).toBe(0);
    expect(fromFlag.stderr).toContain("warning: --token puts the agent token on the command line");
  }, 150_000);
});

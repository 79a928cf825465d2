import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { arch as hostArch, tmpdir } from "node:os";
import { join } from "node:path";
import { needs, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { appVersion } from "../../../../scripts/build";
import { type Arch, nodeRuntimePackage, releaseAgent } from "../../../../scripts/release/release";
import { parseConfigFile } from "../../../agent/src/config";
import { type Harness, startHarness } from "../support/harness";
import { linkTools } from "./support/clean-machine";
import { removeLabelled, until } from "./support/system";

// /etc/cm-agent/agent.env as an operator edits it (issue 40, items 1 and 2), with the released
// installer on a clean machine (no node on the PATH, a temporary root): a control plane behind
// TLS whose certificate a private CA signed, that CA given to the agent only through the env
// file (NODE_EXTRA_CA_CERTS, which Node reads as it starts), and the machine enrolled again
// as a new node after its first was retired. The installed agent runs as its unit runs it:
// `cm-agent run`, the env file's lines its whole environment (EnvironmentFile=).

const ARCH: Arch = hostArch() === "arm64" ? "arm64" : "x64";

needs("docker", "openssl").describe("the agent's env file: a private CA, Node's settings, enrolling again", () => {
  let h: Harness;
  let work = "";
  let root = "";
  let bin = "";
  let release = "";
  let operatorToken = "";
  const version = `${appVersion("agent")}+env.1`;
  const nodes: { id: string; token: string }[] = [];
  const agents: ChildProcess[] = [];
  const installIds: string[] = [];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cm-release-env-"));
    root = join(work, "root");
    bin = join(work, "bin");
    release = join(work, "release");
    mkdirSync(root);
    mkdirSync(bin);
    linkTools(bin, ["iptables", "iptables-restore", "ip6tables", "ip6tables-restore", "nvidia-smi"]);
    await nodeRuntimePackage(ARCH);
    await releaseAgent({ arches: [ARCH], outDir: release, version, gzipLevel: 1 });

    // A private CA, and the control plane's certificate signed by it (for both names the test uses).
    const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: work, stdio: "pipe" });
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=cm test CA", "-keyout", "ca.key", "-out", "ca.pem");
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "key.pem", "-out", "cert.csr");
    writeFileSync(join(work, "san.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    ssl("x509", "-req", "-in", "cert.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1", "-extfile", "san.cnf", "-out", "cert.pem");

    // This process's own API calls take the certificate as it comes; the agent and its doctor verify it.
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
    h = await startHarness(sqliteDatabase, { config: { TLS_CERT: join(work, "cert.pem"), TLS_KEY: join(work, "key.pem"), HEARTBEAT_INTERVAL_MS: 5_000 } });
    expect(h.url).toMatch(/^https:\/\/127\.0\.0\.1:/);
    operatorToken = (await h.signIn()).token;
    for (const name of ["first-enrolment", "enrolled-again"]) {
      const node = await h.call("POST", "/operator/nodes", {
        token: operatorToken,
        body: { name, region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 1 },
      });
      nodes.push({ id: node.json.node.id, token: node.json.agentToken });
    }
  }, 240_000);

  afterAll(async () => {
    for (const agent of agents) if (agent.exitCode === null) agent.kill("SIGTERM");
    for (const id of installIds) await removeLabelled(`cm.install-id=${id}`);
    await h?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  const envFile = () => join(root, "etc/cm-agent/agent.env");
  const installed = (...parts: string[]) => join(root, "opt/cm-agent", ...parts);
  /** install.sh as a clean machine runs it: CM_ROOT, the plain PATH, no checkout around. */
  const install = (script: string, args: string[], env: Record<string, string> = {}) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((done) =>
      execFile(
        "bash",
        [script, ...args],
        { cwd: work, encoding: "utf8", env: { PATH: bin, HOME: work, CM_ROOT: root, ...env }, timeout: 120_000 },
        (err, stdout, stderr) => done({ status: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
      ),
    );

  /**
   * `cm-agent run` with the env file as its environment, as systemd starts the unit (its
   * ExecStart, its EnvironmentFile=): Node's settings are in the process's environment as
   * it starts. The state directory under the root; no egress policy on this machine's
   * firewall (it has its own tests).
   */
  function startAsTheUnit() {
    const file = parseConfigFile(readFileSync(envFile(), "utf8"), envFile());
    const env = {
      PATH: bin,
      ...file.config,
      ...file.node,
      AGENT_STATE_DIR: join(root, "var/lib/cm-agent"),
      AGENT_SANDBOX_POOL: "0",
      AGENT_EGRESS_POLICY: "off",
    };
    const agent = spawn(installed("current/bin/cm-agent"), ["run"], { cwd: work, env, stdio: ["ignore", "pipe", "pipe"] });
    agents.push(agent);
    const log = { text: "" };
    agent.stdout!.on("data", (d: Buffer) => (log.text += d));
    agent.stderr!.on("data", (d: Buffer) => (log.text += d));
    return { agent, log };
  }
  const stop = async (agent: ChildProcess) => {
    if (agent.exitCode !== null) return;
    agent.kill("SIGTERM");
    await new Promise((done) => agent.once("exit", done));
  };
  const online = (nodeId: string, log: { text: string }) =>
    until(
      `${nodeId} online`,
      async () => {
        const n = (await h.call("GET", `/nodes/${nodeId}`)).json.node;
        return n.status === "online" && n.specs.cpuCores > 0;
      },
      60_000,
      async () => `agent log:\n${log.text.slice(-3000)}`,
    );

  it("a private CA in agent.env: doctor fails without it and passes with it, an unknown key only warns, and the agent connects over TLS", async () => {
    const first = nodes[0]!;
    writeFileSync(join(work, "token"), `${first.token}\n`, { mode: 0o600 });
    const without = await install(join(release, "install-cm-agent.sh"), ["--control-plane", h.url, "--token-file", join(work, "token")]);
    expect(without.status, `${without.stdout}\n${without.stderr}`).toBe(1);
    expect(without.stdout).toMatch(/✗ Control plane: GET https:\/\/127\.0\.0\.1:\d+\/health failed: .*certificate/);
    expect(without.stderr).toContain("the agent is installed but was not started");

    // What the operator's guide says to add, and a line the agent does not read.
    appendFileSync(envFile(), `NODE_EXTRA_CA_CERTS=${join(work, "ca.pem")}\nNODE_OPTIONS=--max-semi-space-size=1\nHTTPS_PROXY=http://proxy.invalid:3128\n`);
    const again = await install(join(release, "install-cm-agent.sh"), []);
    expect(again.status, `${again.stdout}\n${again.stderr}`).toBe(0);
    expect(again.stdout).toContain(`kept ${envFile()}`);
    expect(again.stdout).toContain(
      `✓ Node settings: NODE_EXTRA_CA_CERTS=${join(work, "ca.pem")} (1 certificate, trusted besides Node's own CAs), NODE_OPTIONS=--max-semi-space-size=1`,
    );
    expect(again.stdout).toMatch(
      /! Configuration: .*agent\.env: unknown key HTTPS_PROXY, ignored \(known: CONTROL_PLANE_URL, .*NODE_EXTRA_CA_CERTS, NODE_OPTIONS\)/,
    );
    expect(again.stdout).toMatch(/✓ Control plane: GET https:\/\/127\.0\.0\.1:\d+\/health answered 200/);
    expect(again.stdout).toContain(`✓ Token: accepted: this machine is node ${first.id} (first-enrolment)`);

    // The installed program names itself as installed, and answers its version (exit 0 for both).
    const installedAgent = (...args: string[]) => execFileSync(installed("current/bin/cm-agent"), args, { cwd: work, encoding: "utf8", env: { PATH: bin } });
    expect(installedAgent("--help").split("\n")[0]).toBe("Usage: cm-agent [command] [options]");
    expect(installedAgent("--version").trim()).toBe(version);

    // By hand, as the guide says, from a shell whose environment has none of it.
    // Not execFileSync: the control plane answering it runs in this process.
    const byHand = await new Promise<string>((done) =>
      execFile(installed("current/bin/cm-agent"), ["doctor", "--config", envFile()], { cwd: work, encoding: "utf8", env: { PATH: bin } }, (_, stdout) =>
        done(stdout),
      ),
    );
    expect(byHand).toContain(`✓ Token: accepted: this machine is node ${first.id}`);

    const { agent, log } = startAsTheUnit();
    await online(first.id, log);
    installIds.push(readFileSync(join(root, "var/lib/cm-agent/install-id"), "utf8").trim());
    await stop(agent);
  }, 180_000);

  it("enrolled again after a retire and --uninstall: the new token and control plane replace the file's, saying so; doctor and the agent use them", async () => {
    const [first, second] = [nodes[0]!, nodes[1]!];
    expect((await h.call("DELETE", `/operator/nodes/${first.id}`, { token: operatorToken })).status).toBe(200);
    const removed = await install(installed("current/install.sh"), ["--uninstall"]);
    expect(removed.status, `${removed.stdout}\n${removed.stderr}`).toBe(0);
    const before = readFileSync(envFile(), "utf8");
    expect(before).toContain(`AGENT_TOKEN=${first.token}\n`);

    // The same control plane by another name its certificate carries: a changed URL is replaced too.
    const url = h.url.replace("127.0.0.1", "localhost");
    const r = await install(join(release, "install-cm-agent.sh"), ["--control-plane", url], { AGENT_TOKEN: second.token });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stderr).toContain(
      `! replaced in ${envFile()}: the agent token (the one given replaces the file's); CONTROL_PLANE_URL (${h.url} -> ${url}); its other settings kept`,
    );
    expect(`${r.stdout}${r.stderr}`).not.toContain(second.token);
    expect(r.stdout).toContain(`✓ Token: accepted: this machine is node ${second.id} (enrolled-again)`);
    const after = readFileSync(envFile(), "utf8");
    expect(after).not.toContain(first.token);
    expect(after).toContain(`AGENT_TOKEN=${second.token}\n`);
    expect(after).toContain(`CONTROL_PLANE_URL=${url}\n`);
    // Every other line as the operator left it.
    const others = (text: string) => text.split("\n").filter((l) => !/^(AGENT_TOKEN|CONTROL_PLANE_URL)=/.test(l));
    expect(others(after)).toEqual(others(before));
    expect(execFileSync("stat", ["-c", "%a", envFile()], { encoding: "utf8" }).trim()).toBe("600");

    const { agent, log } = startAsTheUnit();
    await online(second.id, log);
    await stop(agent);
  }, 180_000);
});

import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { arch as hostArch, tmpdir } from "node:os";
import { basename, join, relative } from "node:path";
import { needs, sqliteDatabase } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { appVersion } from "../../../../scripts/build";
import { type Arch, nodeRuntimePackage, releaseAgent, releaseCli } from "../../../../scripts/release/release";
import { type Harness, startHarness } from "../support/harness";
import { linkTools } from "./support/clean-machine";
import { notPackedForRoot, writableByOthers } from "./support/file-modes";
import { removeLabelled, until } from "./support/system";
import { ensureWebImage } from "./support/web-image";

// The agent's release as an operator gets it (issue 28): the tarball, install-cm-agent.sh and
// SHA256SUMS, installed into a temporary root laid out as a clean machine: the installer and
// the installed agent run with a PATH of plain system tools (no node, no npm, no tsx), from a
// directory that is no checkout, so the agent runs on the Node runtime it shipped with. Two
// releases are built once for the file (the second for an upgrade); gzip -1 keeps that short.

const ARCH: Arch = hostArch() === "arm64" ? "arm64" : "x64";
const OTHER: Arch = ARCH === "x64" ? "arm64" : "x64";
/** What the agent runs, where the machine has it: the egress policy's firewall tools, the GPUs' nvidia-smi. */
const AGENT_TOOLS = ["iptables", "iptables-restore", "ip6tables", "ip6tables-restore", "nvidia-smi"];

needs("docker").describe("the agent's release tarball, installed on a clean machine", () => {
  let h: Harness;
  let work = "";
  let root = "";
  let bin = "";
  let token = "";
  let nodeId = "";
  const v1 = `${appVersion("agent")}+test.1`;
  const v2 = `${appVersion("agent")}+test.2`;
  const rel1 = () => join(work, "release-1");
  const rel2 = () => join(work, "release-2");
  const agents: ChildProcess[] = [];
  let cmFile = "";
  /** the installed agent's, on every container it made: what afterAll removes */
  let installId = "";

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "cm-release-test-"));
    root = join(work, "root");
    bin = join(work, "bin");
    mkdirSync(root);
    mkdirSync(bin);
    linkTools(bin, AGENT_TOOLS);
    // Built under umask 000 (issue 36), the Node runtime's cache filled first under the usual one.
    await nodeRuntimePackage(ARCH);
    const umask = process.umask(0);
    try {
      await releaseAgent({ arches: [ARCH], outDir: rel1(), version: v1, gzipLevel: 1 });
      await releaseAgent({ arches: [ARCH], outDir: rel2(), version: v2, gzipLevel: 1 });
    } finally {
      process.umask(umask);
    }
    cmFile = await releaseCli({ outDir: rel1() });
    h = await startHarness(sqliteDatabase, { config: { HEARTBEAT_INTERVAL_MS: 5_000 } });
    const op = await h.signIn();
    const node = await h.call("POST", "/operator/nodes", {
      token: op.token,
      body: { name: "from-tarball", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 2 },
    });
    token = node.json.agentToken;
    nodeId = node.json.node.id;
  }, 240_000);

  afterAll(async () => {
    for (const agent of agents) agent.kill("SIGTERM");
    if (installId) await removeLabelled(`cm.install-id=${installId}`);
    await h?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  }, 60_000);

  /** install.sh as a clean machine runs it: CM_ROOT, the plain PATH, no checkout around. */
  const run = (script: string, args: string[], env: Record<string, string> = {}) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((done) =>
      execFile(
        "bash",
        [script, ...args],
        { cwd: work, encoding: "utf8", env: { PATH: bin, HOME: work, CM_ROOT: root, ...env }, timeout: 120_000 },
        (err, stdout, stderr) => done({ status: err ? (typeof err.code === "number" ? err.code : -1) : 0, stdout, stderr }),
      ),
    );
  const installer = (dir: string) => join(dir, "install-cm-agent.sh");
  /** Every path under the root, with link targets: what "nothing changed" compares. */
  const tree = (dir = root): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = join(dir, e.name);
      const name = relative(root, p);
      if (e.isSymbolicLink()) return [`${name} -> ${readlinkSync(p)}`];
      return e.isDirectory() ? [`${name}/`, ...tree(p)] : [name];
    });
  const installed = (...parts: string[]) => join(root, "opt/cm-agent", ...parts);
  const agentVersion = async () => (await runProgram(installed("current/bin/cm-agent"), ["version"], { cwd: work, env: { PATH: bin } })).trim();

  it("the clean machine has no node or npm on its PATH", () => {
    expect(existsSync(join(bin, "node"))).toBe(false);
    const r = execFileSync("bash", ["-c", "command -v node npm tsx || echo none"], { encoding: "utf8", env: { PATH: bin } }).trim();
    expect(r).toBe("none");
  });

  it("packs every entry as root's, writable by root alone, though built under umask 000", () => {
    expect(notPackedForRoot(join(rel1(), `cm-agent-${v1}-linux-${ARCH}.tar.gz`))).toEqual([]);
    expect(notPackedForRoot(join(rel2(), `cm-agent-${v2}-linux-${ARCH}.tar.gz`))).toEqual([]);
  });

  it("--dry-run prints every step and changes nothing", async () => {
    const r = await run(installer(rel1()), ["--dry-run", "--control-plane", h.url], { AGENT_TOKEN: token });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain("matches SHA256SUMS");
    expect(r.stdout).toContain(`would run: ln -sfn ${v1} ${installed("current.new")}`);
    expect(r.stdout).toContain(`would write: ${join(root, "etc/cm-agent/agent.env")} (mode 0600)`);
    expect(r.stdout).toContain("would run: ");
    expect(r.stdout + r.stderr).not.toContain(token);
    expect(tree()).toEqual([]);
  });

  it("refuses a damaged tarball, another architecture's, and a token or URL that would break the env file, changing nothing", async () => {
    const bad = join(work, "damaged");
    mkdirSync(bad);
    for (const f of readdirSync(rel1())) copyFileSync(join(rel1(), f), join(bad, f));
    const tarball = join(bad, `cm-agent-${v1}-linux-${ARCH}.tar.gz`);
    const bytes = readFileSync(tarball);
    const middle = bytes.length >> 1;
    bytes.writeUInt8(bytes.readUInt8(middle) ^ 0xff, middle);
    writeFileSync(tarball, bytes);
    const damaged = await run(installer(bad), ["--control-plane", h.url], { AGENT_TOKEN: token });
    expect(damaged.status).toBe(1);
    expect(damaged.stderr).toContain(`cm-agent-${v1}-linux-${ARCH}.tar.gz does not match SHA256SUMS`);
    expect(damaged.stderr).toContain("nothing was changed");
    expect(tree()).toEqual([]);

    // The right sum for the wrong machine: refused by its name before it is opened.
    const foreign = join(bad, `cm-agent-${v1}-linux-${OTHER}.tar.gz`);
    copyFileSync(join(rel1(), `cm-agent-${v1}-linux-${ARCH}.tar.gz`), foreign);
    const sum = (await runProgram("sha256sum", [foreign])).split(" ")[0];
    writeFileSync(join(bad, "SHA256SUMS"), `${sum}  cm-agent-${v1}-linux-${OTHER}.tar.gz\n`);
    const wrong = await run(installer(bad), ["--tarball", foreign, "--control-plane", h.url], { AGENT_TOKEN: token });
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toContain(`is for ${OTHER}, this machine is ${ARCH}`);
    expect(tree()).toEqual([]);

    // A token or URL that would write a second line into the env file.
    const injected = await run(installer(rel1()), ["--control-plane", h.url], { AGENT_TOKEN: `${token}\nAGENT_EGRESS_POLICY=off` });
    expect(injected.status).toBe(1);
    expect(injected.stderr).toContain("the agent token holds characters an agent token never has");
    const spaced = await run(installer(rel1()), ["--control-plane", `${h.url} x`], { AGENT_TOKEN: token });
    expect(spaced.status).toBe(1);
    expect(spaced.stderr).toContain("--control-plane holds spaces or quotes");
    expect(tree()).toEqual([]);
  });

  it("a truncated download of install-cm-agent.sh runs nothing", async () => {
    const script = readFileSync(installer(rel1()), "utf8");
    const cut = join(work, "truncated");
    mkdirSync(cut);
    for (const f of readdirSync(rel1())) copyFileSync(join(rel1(), f), join(cut, f));
    // Cut in a function's middle (bash: unexpected end of file), and just before the last line calling main.
    for (const length of [script.length >> 1, script.lastIndexOf('main "$@"')]) {
      writeFileSync(installer(cut), script.slice(0, length));
      const r = await run(installer(cut), ["--control-plane", h.url], { AGENT_TOKEN: token });
      expect(r.stdout).toBe("");
      expect(tree()).toEqual([]);
    }
  });

  it("installs: /opt/cm-agent/<version> and current, the env file 0600, the unit; doctor accepts the token; the agent runs on its own Node", async () => {
    writeFileSync(join(work, "token"), `${token}\n`, { mode: 0o600 });
    const r = await run(installer(rel1()), ["--control-plane", h.url, "--token-file", join(work, "token")]);
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain("✓ Token: accepted");
    expect(r.stdout).toContain("systemd is not running here");
    expect(readlinkSync(installed("current"))).toBe(v1);
    expect(writableByOthers(root)).toEqual([]);
    const env = join(root, "etc/cm-agent/agent.env");
    expect(statSync(env).mode & 0o777).toBe(0o600);
    expect(readFileSync(env, "utf8")).toContain(`AGENT_TOKEN=${token}\n`);
    expect(readFileSync(join(root, "etc/systemd/system/cm-agent.service"), "utf8")).toContain("ExecStart=/opt/cm-agent/current/bin/cm-agent run");
    expect(await agentVersion()).toBe(v1);
    expect(execFileSync(installed("current/node/bin/node"), ["--version"], { encoding: "utf8" }).trim()).toBe("v20.20.2");
    // The agent's own `install` (the checkout's way) writes a unit for the built file, node alone, no tsx.
    const own = await runProgram(installed("current/bin/cm-agent"), ["install", "--dry-run", "--control-plane", h.url], {
      cwd: work,
      env: { PATH: bin, AGENT_TOKEN: token },
    });
    const dir = realpathSync(installed(v1));
    expect(own.split("\n")).toContain(`ExecStart=${dir}/node/bin/node ${dir}/lib/cm-agent.mjs run`);
  });

  /** The installed agent, started as its unit would (the config, the plain PATH), its state under the root. */
  function startAgent() {
    const agent = spawn(
      installed("current/bin/cm-agent"),
      ["run", "--config", join(root, "etc/cm-agent/agent.env"), "--state-dir", join(root, "var/lib/cm-agent")],
      {
        cwd: work,
        env: { PATH: bin, AGENT_SANDBOX_POOL: "0" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    agents.push(agent);
    agent.stdout!.on("data", (d: Buffer) => (agentLog += d));
    agent.stderr!.on("data", (d: Buffer) => (agentLog += d));
    return agent;
  }
  const stopAgent = async (agent: ChildProcess) => {
    if (agent.exitCode === null) {
      agent.kill("SIGTERM");
      await new Promise((done) => agent.once("exit", done));
    }
  };
  let agentLog = "";
  const explain = async () => `agent log:\n${agentLog.slice(-3000)}`;
  const nodeOnline = () =>
    until(
      "node online",
      async () => {
        const n = (await h.call("GET", `/nodes/${nodeId}`)).json.node;
        return n.status === "online" && n.specs.cpuCores > 0;
      },
      60_000,
      explain,
    );
  const containersOf = async (deploymentId: string) =>
    (await runProgram("docker", ["ps", "-q", "--filter", `label=cm.deployment-id=${deploymentId}`])).split("\n").filter(Boolean);
  /** A deployment the installed agent runs, kept through the upgrade. */
  let live: { agent: ChildProcess; id: string; tenantToken: string; containers: string[] } | undefined;

  it("cm is one file a tenant runs with a Node of their own (here the release's), with no node_modules", async () => {
    expect(readFileSync(join(rel1(), "SHA256SUMS"), "utf8")).toContain(`  ${basename(cmFile)}\n`);
    const dir = join(work, "tenant");
    mkdirSync(dir);
    copyFileSync(cmFile, join(dir, "cm"));
    // Not execFileSync: the control plane answering cm runs in this process.
    const cm = (...args: string[]) =>
      new Promise<string>((done, fail) =>
        execFile(
          installed("current/node/bin/node"),
          [join(dir, "cm"), ...args],
          { encoding: "utf8", cwd: dir, env: { PATH: bin, HOME: dir }, timeout: 60_000 },
          (err, stdout, stderr) => (err ? fail(new Error(`${err.message}\n${stderr}`)) : done(stdout)),
        ),
      );
    expect((await cm("--version")).trim()).toBe(appVersion("cli"));
    const listed = JSON.parse(await cm("--api", h.url, "--json", "nodes"));
    expect(JSON.stringify(listed)).toContain(nodeId);
  });

  needs("systemd-analyze").it("systemd accepts the installed unit", async () => {
    // Its ExecStart pointed at the install under the root (systemd checks that it is executable), and a
    // stand-in for Docker's unit, which it Requires=; the trailing ":" keeps systemd's own directories.
    const units = join(work, "units");
    mkdirSync(units, { recursive: true });
    const unit = readFileSync(join(root, "etc/systemd/system/cm-agent.service"), "utf8");
    writeFileSync(join(units, "cm-agent.service"), unit.replace("ExecStart=/opt/cm-agent/current/", `ExecStart=${installed("current")}/`));
    writeFileSync(join(units, "docker.service"), "[Unit]\nDescription=stand-in for Docker's unit\n[Service]\nExecStart=/bin/true\n");
    await runProgram("systemd-analyze", ["verify", join(units, "cm-agent.service")], { env: { ...process.env, SYSTEMD_UNIT_PATH: `${units}:` } });
  });

  needs("busybox").it(
    "the installed agent connects to the control plane and runs a deployment",
    async () => {
      const image = ensureWebImage();
      const agent = startAgent();
      await nodeOnline();
      installId = readFileSync(join(root, "var/lib/cm-agent/install-id"), "utf8").trim();
      const tenant = await h.signIn();
      await h.grantCredits(tenant.user.id, 100);
      const created = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: image, ports: [8080] } });
      expect(created.status, created.text).toBe(201);
      const id = created.json.deployment.id;
      await until(
        "deployment running",
        async () => {
          const d = (await h.call("GET", `/deployments/${id}`, { token: tenant.token })).json.deployment;
          if (d.status === "failed") throw new Error(`failed: ${d.statusReason}`);
          return d.status === "running";
        },
        60_000,
        explain,
      );
      live = { agent, id, tenantToken: tenant.token, containers: await containersOf(id) };
      expect(live.containers).toHaveLength(1);
    },
    150_000,
  );

  it("upgrades to the next release by a link swap, keeping the env file and the running deployment; --rollback swaps back", async () => {
    const env = readFileSync(join(root, "etc/cm-agent/agent.env"), "utf8");
    const up = await run(installer(rel2()), ["--skip-doctor"]);
    expect(up.status, `${up.stdout}\n${up.stderr}`).toBe(0);
    expect(up.stdout).toContain(`installed in ${installed(v2)} (was ${v1}; --rollback goes back)`);
    expect(readlinkSync(installed("current"))).toBe(v2);
    expect(readlinkSync(installed("previous"))).toBe(v1);
    expect(await agentVersion()).toBe(v2);
    expect(readFileSync(join(root, "etc/cm-agent/agent.env"), "utf8")).toBe(env);
    if (live) {
      // What systemctl restart does after an upgrade: the old agent stops, the new one starts and adopts.
      await stopAgent(live.agent);
      live.agent = startAgent();
      await until(
        "the new agent says hello",
        async () => agentLog.includes(`"version":"${v2}"`) && agentLog.includes("Adopted existing containers"),
        60_000,
        explain,
      );
      await nodeOnline();
      const d = (await h.call("GET", `/deployments/${live.id}`, { token: live.tenantToken })).json.deployment;
      expect(d.status).toBe("running");
      expect(await containersOf(live.id)).toEqual(live.containers);
    }

    const back = await run(installed("current/install.sh"), ["--rollback"]);
    expect(back.status, `${back.stdout}\n${back.stderr}`).toBe(0);
    expect(readlinkSync(installed("current"))).toBe(v1);
    expect(readlinkSync(installed("previous"))).toBe(v2);
    expect(await agentVersion()).toBe(v1);

    if (live) {
      const stopped = await h.call("POST", `/deployments/${live.id}/stop`, { token: live.tenantToken });
      expect(stopped.status, stopped.text).toBeLessThan(300);
      await until("deployment stopped", async () => (await containersOf(live!.id)).length === 0, 60_000, explain);
      await stopAgent(live.agent);
    }
  }, 150_000);

  it("--uninstall keeps the token and the state; --purge removes them too", async () => {
    mkdirSync(join(root, "var/lib/cm-agent"), { recursive: true });
    const dry = await run(installed("current/install.sh"), ["--uninstall", "--dry-run"]);
    expect(dry.status, `${dry.stdout}\n${dry.stderr}`).toBe(0);
    expect(readlinkSync(installed("current"))).toBe(v1);

    const r = await run(installed("current/install.sh"), ["--uninstall"]);
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    const left = tree();
    expect(left.filter((p) => p.startsWith("opt/cm-agent") || p.includes("cm-agent.service") || p.startsWith("usr/local/bin/cm-agent"))).toEqual([]);
    expect(left).toContain("etc/cm-agent/agent.env");
    expect(left).toContain("var/lib/cm-agent/");

    const purge = await run(installer(rel1()), ["--uninstall", "--purge"]);
    expect(purge.status, `${purge.stdout}\n${purge.stderr}`).toBe(0);
    expect(tree().filter((p) => p.includes("cm-agent"))).toEqual([]);
  });
});

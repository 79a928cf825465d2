// `doctor`'s logic against a fake control plane (HTTP + WebSocket), a fake engine
// and fake host probes, so its verdict never depends on the machine the tests run
// on. Reaching Docker and reading nvidia-smi are tested with the adapters.
import { afterEach, describe, expect, it } from "vitest";
import { parseAgentConfig } from "../../src/config";
import type { DoctorDeps } from "../../src/install/doctor";
import { nodeSettingsCheck, runDoctor } from "../../src/install/doctor";
import type { EngineClient } from "../../src/runtime/container-runtime";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import type { EngineInfo } from "../../src/runtime/types";
import { fakeHostProbe, testGpu } from "../support/agent-harness";
import { FakeControlPlane, TEST_TOKEN } from "../support/fake-control-plane";

let fake: FakeControlPlane;

/** An engine that answers as a healthy x86_64 Docker without the NVIDIA runtime. */
function fakeEngine(overrides: Partial<EngineInfo> = {}): EngineClient {
  const info: EngineInfo = {
    version: "24.0.7",
    dataRoot: "/var/lib/docker",
    runtimes: ["io.containerd.runc.v2", "runc"],
    architecture: "x86_64",
    ...overrides,
  };
  return { engineVersion: async () => info.version, engineInfo: async () => info };
}
afterEach(async () => {
  await fake?.stop();
});

async function doctor(overrides: Partial<DoctorDeps> & { token?: string } = {}): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runDoctor({
    config: { ok: true, value: parseAgentConfig({ controlPlaneUrl: fake.url, token: overrides.token ?? TEST_TOKEN }) },
    dockerSocket: "/var/run/docker.sock",
    engine: fakeEngine(),
    hostProbe: fakeHostProbe([], "nvidia-smi was not found: no NVIDIA driver is installed on this machine"),
    fetch,
    timeoutMs: 3_000,
    print: (line) => lines.push(line),
    ...overrides,
  });
  return { code, lines };
}

describe("doctor", () => {
  it("passes on a healthy CPU-only machine, warning about the missing GPUs", async () => {
    fake = await FakeControlPlane.start();
    const { code, lines } = await doctor();
    expect(lines).toEqual([
      `✓ Configuration: control plane ${fake.url}, socket ws://127.0.0.1:${fake.port}/agent/ws`,
      "✓ Docker: engine 24.0.7 (x86_64) at /var/run/docker.sock",
      "! NVIDIA GPUs: none: nvidia-smi was not found: no NVIDIA driver is installed on this machine. This node will take CPU-only deployments",
      "    fix: if this machine has NVIDIA GPUs, install the NVIDIA driver so that nvidia-smi lists them",
      "- NVIDIA container runtime: not needed without GPUs",
      `✓ Control plane: GET ${fake.url}/health answered 200`,
      "✓ Token: accepted: this machine is node node-test (test node)",
      "All required checks passed.",
    ]);
    expect(code).toBe(0);
    expect(fake.hellos).toBe(0);
  });

  it("fails on a rejected token, a sick control plane or GPUs Docker cannot use", async () => {
    fake = await FakeControlPlane.start();
    const rejected = await doctor({ token: "wrong" });
    expect(rejected.code).toBe(1);
    expect(rejected.lines).toContainEqual(expect.stringMatching(/^✗ Token: the control plane rejected this agent's token: unknown agent token$/));
    expect(rejected.lines).toContainEqual(expect.stringContaining("fix: copy the node's token again"));

    fake.healthStatus = 503;
    const sick = await doctor();
    expect(sick.code).toBe(1);
    expect(sick.lines).toContain(`✗ Control plane: GET ${fake.url}/health answered 503`);
    expect(sick.lines).toContain("- Token: the control plane does not answer");

    fake.healthStatus = 200;
    const gpus = await doctor({ hostProbe: fakeHostProbe([testGpu(0), testGpu(1)]) });
    expect(gpus.code).toBe(1);
    expect(gpus.lines).toContain("✓ NVIDIA GPUs: 2 found: #0 Test GPU (24 GB), #1 Test GPU (24 GB)");
    expect(gpus.lines).toContainEqual(
      expect.stringMatching(/^✗ NVIDIA container runtime: Docker knows no "nvidia" runtime \(runtimes: io\.containerd\.runc\.v2, runc\)/),
    );
    expect(gpus.lines).toContain("    fix: install nvidia-container-toolkit, then: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker");
  });

  it("fails on an engine whose architecture has no sandbox program", async () => {
    fake = await FakeControlPlane.start();
    const { code, lines } = await doctor({ engine: fakeEngine({ architecture: "ppc64le" }) });
    expect(code).toBe(1);
    expect(lines).toContainEqual(
      expect.stringMatching(/^✗ Docker: engine 24\.0\.7 runs on ppc64le: the agent's network sandboxes exist for x86_64 and aarch64 only$/),
    );
  });

  it("fails when Docker or the control plane cannot be reached", async () => {
    fake = await FakeControlPlane.start();
    const url = fake.url;
    await fake.stop();
    const { code, lines } = await doctor({ engine: new DockerRuntime({ socketPath: "/nonexistent/docker.sock" }), dockerSocket: "/nonexistent/docker.sock" });
    expect(code).toBe(1);
    expect(lines).toContainEqual(expect.stringMatching(/^✗ Docker: cannot reach the engine at \/nonexistent\/docker\.sock: .*ENOENT/));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^✗ Control plane: GET ${url}/health failed: .*ECONNREFUSED`)));
    expect(lines.at(-1)).toBe("2 required checks failed.");
    fake = await FakeControlPlane.start(); // for afterEach
  });

  it("reports an invalid configuration and skips what needs it", async () => {
    fake = await FakeControlPlane.start();
    const { code, lines } = await doctor({ config: { ok: false, problems: ["AGENT_TOKEN (or --token) is required"] } });
    expect(code).toBe(1);
    expect(lines[0]).toBe("✗ Configuration: AGENT_TOKEN (or --token) is required");
    expect(lines).toContain("- Token: no valid configuration");
  });

  it("checks the token with a lookup, never by connecting as the agent", async () => {
    fake = await FakeControlPlane.start();
    const { code, lines } = await doctor();
    expect(code).toBe(0);
    expect(lines).toContain("✓ Token: accepted: this machine is node node-test (test node)");
    expect(fake.whoamis).toBe(1);
    expect(fake.hellos).toBe(0);
  });

  it("shows what the running agent service wrote to its state directory", async () => {
    fake = await FakeControlPlane.start();
    const status = { pid: process.pid, agentVersion: "0.1.0", state: "ready" as const, since: Date.parse("2026-01-01T00:00:00Z"), nodeId: "node-7" };
    const ready = await doctor({ agentStatus: { status, alive: true } });
    expect(ready.code).toBe(0);
    expect(ready.lines).toContain(`✓ Agent service: connected as node node-7 since 2026-01-01T00:00:00.000Z (pid ${process.pid})`);

    const failed = await doctor({
      agentStatus: { status: { ...status, state: "disconnected", failure: "the control plane rejected this agent's token (close 4401)." }, alive: true },
    });
    expect(failed.code).toBe(1);
    expect(failed.lines).toContain("✗ Agent service: stopped retrying: the control plane rejected this agent's token (close 4401).");
    expect(failed.lines).toContain("    fix: fix the cause, then: systemctl restart cm-agent");
  });

  it("reports Node's settings and the config file's warnings; a CA file it cannot read fails", async () => {
    fake = await FakeControlPlane.start();
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const files: Record<string, string> = { "/etc/cm-agent/ca.pem": pem, "/etc/cm-agent/empty.pem": "" };
    const readFile = (path: string) => {
      if (files[path] === undefined) throw new Error(`ENOENT: no such file or directory, open '${path}'`);
      return files[path];
    };
    const env = { NODE_EXTRA_CA_CERTS: "/etc/cm-agent/ca.pem", NODE_OPTIONS: "--max-semi-space-size=1" };
    const ok = await doctor({ nodeSettings: nodeSettingsCheck(env, {}, readFile), configWarnings: ["/x.env: unknown key HTTPS_PROXY, ignored (known: ...)"] });
    expect(ok.code).toBe(0);
    expect(ok.lines.slice(1, 4)).toEqual([
      "! Configuration: /x.env: unknown key HTTPS_PROXY, ignored (known: ...)",
      "    fix: correct or remove it, unless it is meant for something else",
      "✓ Node settings: NODE_EXTRA_CA_CERTS=/etc/cm-agent/ca.pem (1 certificate, trusted besides Node's own CAs), NODE_OPTIONS=--max-semi-space-size=1",
    ]);
    expect(nodeSettingsCheck({}, {}, readFile)).toBeUndefined();
    expect(nodeSettingsCheck({ NODE_EXTRA_CA_CERTS: "/etc/cm-agent/gone.pem" }, {}, readFile)).toMatchObject({
      status: "fail",
      detail: "NODE_EXTRA_CA_CERTS=/etc/cm-agent/gone.pem cannot be read: ENOENT: no such file or directory, open '/etc/cm-agent/gone.pem'",
    });
    expect(nodeSettingsCheck({ NODE_EXTRA_CA_CERTS: "/etc/cm-agent/empty.pem" }, {}, readFile)).toMatchObject({
      status: "fail",
      detail: expect.stringContaining("holds no PEM certificate"),
    });
    // Not relaunched with the file's (a runCli without relaunch): said, not hidden.
    expect(nodeSettingsCheck({}, { NODE_EXTRA_CA_CERTS: "/etc/cm-agent/ca.pem" }, readFile)).toMatchObject({ status: "warn" });
  });
});

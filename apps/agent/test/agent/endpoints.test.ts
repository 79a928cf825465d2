// Public endpoints from the agent's side: readiness of exposed ports, and the
// per-connection tunnel socket it opens to the control plane when asked.
import { createHash } from "node:crypto";
import { needs } from "@cm/testkit";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { deploymentSpec, startTestAgent } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane, TEST_TOKEN } from "../support/fake-control-plane";
import { readSlowly } from "../support/read-slowly";
import { ensureScriptImage } from "../support/script-image";

const run = dockerTestRun();
let image = "";
let fake: FakeControlPlane;
let agent: Agent;

beforeAll(() => {
  image = ensureScriptImage();
});
afterEach(async () => {
  await agent?.stop();
  await fake?.stop();
});
afterAll(async () => {
  await run.cleanup();
});

// A web server that starts listening two seconds after the container starts.
const WEB = "mkdir -p /tmp/www && echo hello-from-container > /tmp/www/index.html && sleep 2 && httpd -f -p 8080 -h /tmp/www";

needs("docker", "busybox").describe("endpoints", () => {
  it("reports a port ready once something listens on it, and carries a tunnel to it", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake, run, { config: { timing: { endpointProbeMs: 200, endpointIdleProbeMs: 1_000 } } });
    await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
    const spec = deploymentSpec(run, "web", image, { env: { SCRIPT: WEB }, ports: [8080] });
    fake.command("create", spec);
    const reports = () => fake.of("endpoints").filter((f) => f.deploymentId === spec.deploymentId);

    await fake.waitFor(() => reports().some((f) => f.ports[0]?.ready), 15_000, "port 8080 ready");
    expect(reports()[0]!.ports).toEqual([{ port: 8080, ready: false }]); // before httpd listened
    expect(reports().at(-1)!.ports).toEqual([{ port: 8080, ready: true }]);
    const count = reports().length;
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(reports()).toHaveLength(count); // unchanged readiness is not sent again

    const tunnelId = fake.openTunnel(spec.deploymentId, 8080);
    const tunnel = await fake.waitFor(() => fake.tunnels.get(tunnelId), 5_000, "the tunnel socket");
    expect(tunnel.authorization).toBe(`Bearer ${TEST_TOKEN}`);
    const response = await new Promise<string>((resolve) => {
      const chunks: Buffer[] = [];
      tunnel.socket.on("data", (data: Buffer) => chunks.push(data));
      tunnel.socket.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      tunnel.socket.write("GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n");
    });
    expect(response).toMatch(/^HTTP\/1\.[01] 200 OK/);
    expect(response).toContain("hello-from-container");
  });

  it("carries a large download intact to a control plane that reads slowly, and what a container says before any request", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake, run, { config: { timing: { endpointProbeMs: 200 } } });
    await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
    // 8080: 24 MiB of random bytes and their digest over HTTP. 8081: a server
    // that greets first and hangs up (as SMTP or FTP servers greet).
    const SCRIPT =
      "mkdir -p /tmp/www && head -c 25165824 /dev/urandom > /tmp/www/big && sha256sum /tmp/www/big > /tmp/www/big.sha && " +
      "(while true; do echo greetings-from-the-container | nc -l -p 8081; done &) && httpd -f -p 8080 -h /tmp/www";
    const spec = deploymentSpec(run, "big", image, { env: { SCRIPT }, ports: [8080, 8081] });
    fake.command("create", spec);
    const ready = () => fake.of("endpoints").some((f) => f.deploymentId === spec.deploymentId && f.ports.every((p) => p.ready));
    await fake.waitFor(() => ready() || undefined, 20_000, "both ports ready");

    const tunnelTo = async (port: number) => {
      const id = fake.openTunnel(spec.deploymentId, port);
      return (await fake.waitFor(() => fake.tunnels.get(id), 5_000, "the tunnel socket")).socket;
    };
    const get = async (path: string) => {
      const socket = await tunnelTo(8080);
      socket.write(`GET ${path} HTTP/1.0\r\nHost: x\r\n\r\n`);
      const raw = await readSlowly(socket, 256 * 1024);
      const at = raw.indexOf("\r\n\r\n");
      return { head: raw.subarray(0, at).toString("latin1"), body: raw.subarray(at + 4) };
    };

    const digest = (await get("/big.sha")).body.toString("utf8").split(" ")[0];
    const big = await get("/big");
    expect(big.head).toMatch(/^HTTP\/1\.[01] 200 OK/);
    expect(big.body.length).toBe(25165824);
    expect(createHash("sha256").update(big.body).digest("hex")).toBe(digest);

    // The greeting arrives while the agent is still waiting for its tunnel's 101.
    fake.tunnelAnswerDelayMs = 300;
    const greeting = await readSlowly(await tunnelTo(8081), 256 * 1024);
    expect(greeting.toString("utf8")).toBe("greetings-from-the-container\n");
  }, 60_000);

  it("carries a tunnel to a raw TCP port (tcpPorts), which is never probed as an endpoint, and to no undeclared port", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake, run, { config: { timing: { endpointProbeMs: 200, endpointIdleProbeMs: 1_000 } } });
    await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
    const script = "nc -ll -p 7000 -e cat & mkdir -p /tmp/www && httpd -f -p 8080 -h /tmp/www";
    const spec = deploymentSpec(run, "tcp", image, { env: { SCRIPT: script }, ports: [8080], tcpPorts: [7000] });
    fake.command("create", spec);
    const reports = () => fake.of("endpoints").filter((f) => f.deploymentId === spec.deploymentId);
    await fake.waitFor(() => reports().some((f) => f.ports[0]?.ready), 15_000, "port 8080 ready");
    // 7000 listens too, and is still not reported: reported, the control plane would make it an endpoint.
    expect(reports().flatMap((f) => f.ports.map((p) => p.port))).not.toContain(7000);

    const tunnelId = fake.openTunnel(spec.deploymentId, 7000);
    const tunnel = await fake.waitFor(() => fake.tunnels.get(tunnelId), 5_000, "the tunnel socket");
    const echoed = await new Promise<string>((resolve) => {
      let got = "";
      tunnel.socket.on("data", (data: Buffer) => {
        got += data.toString("utf8");
        if (got.endsWith("\n")) resolve(got);
      });
      tunnel.socket.write("raw bytes\n");
    });
    expect(echoed).toBe("raw bytes\n");
    tunnel.socket.destroy();

    const undeclared = fake.openTunnel(spec.deploymentId, 7001);
    const error = await fake.waitFor(() => fake.of("tunnel_error").find((e) => e.tunnelId === undeclared), 10_000, "the tunnel error");
    expect(error.reason).toBe(`port 7001 is not exposed by deployment ${spec.deploymentId}`);
  });

  it("answers tunnel_error when nothing can be reached", async () => {
    fake = await FakeControlPlane.start();
    agent = await startTestAgent(fake, run);
    await fake.waitFor(() => agent.state === "ready", 5_000, "ready");
    const spec = deploymentSpec(run, "closed", image, { env: { SCRIPT: "sleep 600" }, ports: [8080] });
    fake.command("create", spec);
    await fake.waitFor(() => fake.statuses(spec.deploymentId).some((s) => s.status === "running"), 15_000, "running");

    const refused = fake.openTunnel(spec.deploymentId, 8080);
    const unexposed = fake.openTunnel(spec.deploymentId, 9999);
    const unknown = fake.openTunnel("dep-elsewhere", 8080);
    const errors = await fake.waitFor(() => (fake.of("tunnel_error").length === 3 ? fake.of("tunnel_error") : undefined), 10_000, "three tunnel errors");
    const reason = (id: string) => errors.find((e) => e.tunnelId === id)?.reason;
    expect(reason(refused)).toMatch(/^nothing answers on port 8080 yet/);
    expect(reason(unexposed)).toBe(`port 9999 is not exposed by deployment ${spec.deploymentId}`);
    expect(reason(unknown)).toBe("deployment dep-elsewhere has no running container on this node");
    expect(fake.tunnels.size).toBe(0);
  });
});

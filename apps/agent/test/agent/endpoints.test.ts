// Public endpoints from the agent's side: readiness of exposed ports, and the
// per-connection tunnel socket it opens to the control plane when asked.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Agent } from "../../src/agent";
import { deploymentSpec, startTestAgent } from "../support/agent-harness";
import { dockerTestRun } from "../support/docker-test-run";
import { FakeControlPlane, TEST_TOKEN } from "../support/fake-control-plane";
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

describe("endpoints", () => {
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

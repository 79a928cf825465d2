import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { selfSignedCertificate } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { readSlowly } from "../../../agent/test/support/read-slowly";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { systemClock } from "../../src/services/ids";
import { type Harness, startHarness } from "../support/harness";
import { removeLabelled, until } from "./support/system";

// Production's shape: the control plane speaks HTTPS itself (TLS_CERT/TLS_KEY)
// and the agent, run as its command runs on a GPU machine, trusts the
// certificate through NODE_EXTRA_CA_CERTS, so its control connection and every
// tunnel are TLS. A large download must arrive whole through a tunnel whose
// agent side writes into TLS.

const root = path.resolve(import.meta.dirname, "../../../..");
const DOMAIN = "gpu.test";
const BIG = 24 * 1024 * 1024;
// This process's own API calls take the test certificate as it comes; the agent verifies it.
process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";

needs("docker", "busybox", "openssl").describe("endpoints through an agent connected over TLS", () => {
  let h: Harness;
  let agent: ChildProcess;
  let nodeId = "";
  let ca: Buffer;
  let endpointHost = "";
  const dir = mkdtempSync(path.join(os.tmpdir(), "cm-tls-tunnel-"));
  let image = "";

  beforeAll(async () => {
    image = ensureScriptImage();
    await selfSignedCertificate({
      cert: `${dir}/cert.pem`,
      key: `${dir}/key.pem`,
      commonName: DOMAIN,
      subjectAltName: `DNS:${DOMAIN},DNS:*.${DOMAIN},IP:127.0.0.1`,
    });
    ca = readFileSync(`${dir}/cert.pem`);
    h = await startHarness(sqlite, {
      config: { TLS_CERT: `${dir}/cert.pem`, TLS_KEY: `${dir}/key.pem`, GATEWAY_DOMAIN: DOMAIN, HEARTBEAT_INTERVAL_MS: 2_000 },
      overrides: { clock: systemClock },
    });
    expect(h.url).toMatch(/^https:\/\/127\.0\.0\.1:/);
    const operator = await h.signIn();
    const node = await h.call("POST", "/operator/nodes", {
      token: operator.token,
      body: { name: "tls", region: "eu-west", country: "DE", hourlyRateCents: 10, maxDeployments: 4 },
    });
    nodeId = node.json.node.id;
    agent = spawn(
      process.execPath,
      ["--import", "tsx", "apps/agent/src/index.ts", "--control-plane", h.url, "--token", node.json.agentToken, "--state-dir", `${dir}/agent`],
      {
        cwd: root,
        // AGENT_EGRESS_POLICY=off: an agent run as root would put its egress policy on this machine's firewall and,
        // as agents do when they stop, leave it there; the policy has its own tests (apps/agent/test/egress).
        env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: "", NODE_EXTRA_CA_CERTS: `${dir}/cert.pem`, LOG_LEVEL: "warn", AGENT_EGRESS_POLICY: "off" },
        stdio: ["ignore", "ignore", "inherit"],
      },
    );
    await until("node online", async () => (await h.call("GET", `/nodes/${nodeId}`)).json.node.status === "online", 30_000);

    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1000);
    // Random bytes and their digest, served by busybox httpd.
    const SCRIPT = `mkdir -p /tmp/www && head -c ${BIG} /dev/urandom > /tmp/www/big && sha256sum /tmp/www/big > /tmp/www/big.sha && httpd -f -p 8080 -h /tmp/www`;
    const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: image, ports: [8080], env: { SCRIPT } } });
    const d = await until(
      "endpoint ready",
      async () => {
        const x = (await h.call("GET", `/deployments/${r.json.deployment.id}`, { token: tenant.token })).json.deployment;
        return x.endpoints[0]?.ready && x;
      },
      60_000,
      async () => `deployment: ${JSON.stringify((await h.call("GET", `/deployments/${r.json.deployment.id}`, { token: tenant.token })).json.deployment)}`,
    );
    endpointHost = new URL(d.endpoints[0].url).host;
  }, 120_000);

  afterAll(async () => {
    const exited = agent && agent.exitCode === null ? new Promise((r) => agent.once("exit", r)) : undefined;
    agent?.kill("SIGTERM");
    await exited;
    await h?.close();
    if (nodeId) await removeLabelled(`cm.node-id=${nodeId}`);
  }, 60_000);

  /** GET through the endpoint over HTTPS, verifying the certificate; reads slowly so backpressure reaches the agent. */
  const get = (p: string) =>
    new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
      const u = new URL(h.url);
      https
        .get({ host: "127.0.0.1", port: u.port, path: p, servername: endpointHost, headers: { host: endpointHost }, ca, rejectUnauthorized: true }, (res) => {
          readSlowly(res, 512 * 1024).then((body) => resolve({ status: res.statusCode!, body }), reject);
        })
        .on("error", reject);
    });

  it("carries a large download intact from the container to an HTTPS client", async () => {
    const digest = (await get("/big.sha")).body.toString("utf8").split(" ")[0];
    const big = await get("/big");
    expect(big.status).toBe(200);
    expect(big.body.length).toBe(BIG);
    expect(createHash("sha256").update(big.body).digest("hex")).toBe(digest);
  }, 60_000);
});

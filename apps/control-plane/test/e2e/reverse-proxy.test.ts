import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { selfSignedCertificate } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { freePort } from "../faults/support/pg-cluster";
import { type System, startSystem, until } from "./support/system";
import { ensureWebImage } from "./support/web-image";

// deploy/nginx/marketplace.conf, as an operator would install it, in front of
// a real deployment: TLS at nginx, endpoints and the API behind it.

const root = path.resolve(import.meta.dirname, "../../../..");
/** The endpoints' domain, and the API's: two registrable domains, as the control plane requires. */
const DOMAIN = "gpu.test";
const API_DOMAIN = "console.test";
let image = "";

needs("docker", "busybox", "nginx", "openssl").describe("the example nginx configuration", () => {
  let s: System;
  let nginx: ChildProcess;
  let nginxPort: number;
  let ca: Buffer;
  let endpointHost: string;
  const dir = mkdtempSync(path.join(os.tmpdir(), "cm-nginx-"));

  beforeAll(async () => {
    // Made before the system starts: building it blocks this process, and with it
    // the agent's heartbeats and the control plane that waits for them.
    image = ensureWebImage();
    s = await startSystem(sqlite, { GATEWAY_DOMAIN: DOMAIN, PUBLIC_DOMAIN: API_DOMAIN, TRUSTED_PROXIES: "127.0.0.1" });
    const cpPort = new URL(s.h.url).port;
    await selfSignedCertificate({
      cert: `${dir}/cert.pem`,
      key: `${dir}/key.pem`,
      commonName: API_DOMAIN,
      subjectAltName: `DNS:${API_DOMAIN},DNS:*.${DOMAIN}`,
    });
    ca = readFileSync(`${dir}/cert.pem`);
    nginxPort = await freePort();
    const site = readFileSync(path.join(root, "deploy/nginx/marketplace.conf"), "utf8")
      .replaceAll("cloud.example.com", API_DOMAIN)
      .replaceAll("example-gpu.net", DOMAIN)
      .replace("server 127.0.0.1:8080 ", `server 127.0.0.1:${cpPort} `)
      .replace("listen 443 ssl;", `listen 127.0.0.1:${nginxPort} ssl;`)
      .replace("/etc/ssl/marketplace/fullchain.pem", `${dir}/cert.pem`)
      .replace("/etc/ssl/marketplace/privkey.pem", `${dir}/key.pem`);
    writeFileSync(`${dir}/site.conf`, site);
    writeFileSync(
      `${dir}/nginx.conf`,
      `worker_processes 1; pid ${dir}/nginx.pid; error_log ${dir}/error.log; daemon off;\nevents {}\nhttp { access_log off; client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; include ${dir}/site.conf; }\n`,
    );
    nginx = spawn("nginx", ["-c", `${dir}/nginx.conf`, "-p", dir], { stdio: "inherit" });
    await until(
      "nginx listening",
      async () =>
        new Promise<boolean>((r) =>
          net
            .connect(nginxPort, "127.0.0.1")
            .once("connect", function (this: net.Socket) {
              this.destroy();
              r(true);
            })
            .once("error", () => r(false)),
        ),
    );

    await s.agent().start();
    const t = await s.h.signIn();
    await s.h.grantCredits(t.user.id, 1000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    const r = await s.h.call("POST", "/deployments", { token: t.token, body: { nodeId: s.nodeId, customImage: image, ports: [8080] } });
    const d = await until(
      "endpoint ready",
      async () => {
        const x = (await s.h.call("GET", `/deployments/${r.json.deployment.id}`, { token: t.token })).json.deployment;
        return x.endpoints[0]?.ready && x;
      },
      60_000,
      s.explain(r.json.deployment.id, t.token),
    );
    expect(d.endpoints[0].url).toMatch(new RegExp(`^https://[a-z2-7]{16}-8080\\.${DOMAIN.replace(".", "\\.")}$`));
    endpointHost = new URL(d.endpoints[0].url).host;
  }, 120_000);
  afterAll(async () => {
    nginx?.kill("SIGTERM");
    await s?.close();
  }, 60_000);

  const get = (host: string, p: string, method = "GET", body?: Buffer) =>
    new Promise<{ status: number; body: string; arrivals: number[] }>((resolve, reject) => {
      const arrivals: number[] = [];
      const req = https.request({ host: "127.0.0.1", port: nginxPort, path: p, method, servername: host, headers: { host }, ca }, (res) => {
        let text = "";
        res.on("data", (c) => {
          text += c;
          arrivals.push(Date.now());
        });
        res.on("end", () => resolve({ status: res.statusCode!, body: text, arrivals }));
      });
      req.on("error", reject);
      req.end(body);
    });

  it("serves the API and the endpoint over HTTPS through nginx", async () => {
    expect((await get(API_DOMAIN, "/health")).status).toBe(200);
    const r = await get(endpointHost, "/");
    expect(r.body).toBe("hello from the container");
    const h = JSON.parse((await get(endpointHost, "/headers")).body);
    expect(h["x-forwarded-proto"]).toBe("https");
    expect(h["x-forwarded-host"]).toBe(endpointHost);
  });

  it("streams a large upload and server-sent events through nginx", async () => {
    const body = Buffer.alloc(8 * 1024 * 1024, 1);
    expect(JSON.parse((await get(endpointHost, "/echo", "POST", body)).body)).toEqual({ bytes: body.length, method: "POST" });
    const sse = await get(endpointHost, "/sse");
    expect(sse.arrivals.length).toBeGreaterThanOrEqual(3);
    expect(sse.arrivals.at(-1)! - sse.arrivals[0]!).toBeGreaterThanOrEqual(200);
  });

  it("upgrades a WebSocket through nginx", async () => {
    const options = { headers: { host: endpointHost }, servername: endpointHost, ca } as import("ws").ClientOptions;
    const ws = new WebSocket(`wss://127.0.0.1:${nginxPort}/ws`, options);
    await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
    const echoed = new Promise<string>((r) => ws.once("message", (m) => r(m.toString())));
    ws.send("via nginx");
    expect(await echoed).toBe("via nginx");
    ws.close();
  });
});

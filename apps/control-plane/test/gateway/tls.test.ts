import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { selfSignedCertificate } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

// TLS terminated by the control plane itself, with a wildcard certificate for
// the gateway domain: the API and every endpoint host on one HTTPS listener.

needs("openssl").describe("HTTPS with TLS_CERT and TLS_KEY", () => {
  let h: Harness;
  const dir = mkdtempSync(path.join(os.tmpdir(), "cm-tls-"));
  const cert = path.join(dir, "cert.pem");
  const key = path.join(dir, "key.pem");

  beforeAll(async () => {
    await selfSignedCertificate({ cert, key, commonName: "gpu.test", subjectAltName: "DNS:gpu.test,DNS:*.gpu.test" });
    h = await startHarness(sqlite, { config: { TLS_CERT: cert, TLS_KEY: key, GATEWAY_DOMAIN: "gpu.test" } });
  });
  afterAll(() => h.close());

  const get = (host: string, p: string) =>
    new Promise<{ status: number; body: string; cert: string }>((resolve, reject) => {
      const u = new URL(h.url);
      https
        .get({ host: "127.0.0.1", port: u.port, path: p, servername: host, headers: { host }, ca: execFileSync("cat", [cert]) }, (res) => {
          let body = "";
          const cn = String((res.socket as import("node:tls").TLSSocket).getPeerCertificate().subject.CN);
          res.on("data", (c) => (body += c));
          res.on("end", () => resolve({ status: res.statusCode!, body, cert: cn }));
        })
        .on("error", reject);
    });

  it("serves the API over HTTPS", async () => {
    expect(h.url).toMatch(/^https:\/\//);
    const r = await get("gpu.test", "/health");
    expect(r.status).toBe(200);
    expect(r.cert).toBe("gpu.test");
  });

  it("serves endpoint hosts under the wildcard on the same listener", async () => {
    const r = await get("aaaaaaaaaaaaaaaa-8080.gpu.test", "/");
    expect(r.status).toBe(404);
    expect(r.body).toContain("No such endpoint");
  });
});

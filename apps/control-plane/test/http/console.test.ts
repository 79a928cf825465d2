import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

// The web console's files as the control plane serves them (routes/console.ts), from a folder laid
// out as Vite builds it; the console itself is tested in a real browser in apps/console/test.

const ENDPOINT_HOST = "abcdefghijklmnop-8080.gw.test";

/** A request with the Host and Accept a browser would send (fetch cannot set Host). */
function get(url: string, pathName: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.get(`${url}${pathName}`, { headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
  });
}

const HTML = { accept: "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8" };

describe("the web console under /app/", () => {
  let h: Harness;
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "cm-console-"));
    fs.mkdirSync(path.join(dir, "assets"));
    fs.writeFileSync(path.join(dir, "index.html"), '<!doctype html><script type="module" src="/app/assets/index-AbC123.js"></script><div id="root"></div>');
    fs.writeFileSync(path.join(dir, "assets/index-AbC123.js"), "console.log('console');");
    fs.writeFileSync(path.join(dir, "assets/index-AbC123.css"), "body{}");
    fs.writeFileSync(path.join(os.tmpdir(), "cm-console-secret.txt"), "not for the web");
    h = await startHarness(sqlite, { config: { CONSOLE_DIR: dir, GATEWAY_DOMAIN: "gw.test" } });
  });
  afterAll(async () => {
    await h?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(path.join(os.tmpdir(), "cm-console-secret.txt"), { force: true });
  });

  it("sends a browser asking for / to /app/, and leaves / to the API for everyone else", async () => {
    const browser = await get(h.url, "/", HTML);
    expect(browser.status).toBe(302);
    expect(browser.headers.location).toBe("/app/");
    const script = await get(h.url, "/", { accept: "application/json" });
    expect(script.status).toBe(404);
    expect(JSON.parse(script.body).error.code).toBe("NOT_FOUND");
    expect((await get(h.url, "/app", HTML)).headers.location).toBe("/app/");
  });

  it("answers index.html with a CSP that allows no inline script, this origin's WebSocket, and no framing; never cached", async () => {
    const r = await get(h.url, "/app/", HTML);
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toMatch(/^text\/html/);
    expect(r.body).toContain('<div id="root">');
    expect(r.headers["cache-control"]).toBe("no-cache");
    const csp = r.headers["content-security-policy"] as string;
    const host = new URL(h.url).host;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toMatch(new RegExp(`connect-src 'self' ws://${host} wss://${host}`));
    expect(r.headers["x-content-type-options"]).toBe("nosniff");
  });

  it("serves hashed assets for a year with their type, and index.html for the console's own routes", async () => {
    const js = await get(h.url, "/app/assets/index-AbC123.js");
    expect(js.status).toBe(200);
    expect(js.headers["content-type"]).toMatch(/^text\/javascript/);
    expect(js.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(js.headers["content-security-policy"]).toContain("script-src 'self'");
    expect((await get(h.url, "/app/assets/index-AbC123.css")).headers["content-type"]).toMatch(/^text\/css/);

    for (const route of ["/app/nodes", "/app/deployments/dep_1", "/app/nodes?region=eu-west"]) {
      const r = await get(h.url, route, HTML);
      expect(r.status, route).toBe(200);
      expect(r.body, route).toContain('<div id="root">');
      expect(r.headers["cache-control"], route).toBe("no-cache");
    }
  });

  it("answers a missing asset 404 in the error shape, and nothing outside its folder however the path is spelt", async () => {
    const missing = await get(h.url, "/app/assets/index-Gone99.js");
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body).error.code).toBe("NOT_FOUND");
    for (const p of ["/app/../cm-console-secret.txt", "/app/%2e%2e/cm-console-secret.txt", "/app/assets/%2e%2e/%2e%2e/cm-console-secret.txt", "/app/%00.js"]) {
      const r = await get(h.url, p);
      expect(r.body, p).not.toContain("not for the web");
      expect(r.status, p).toBeLessThan(500);
    }
  });

  it("is never served on a tenant endpoint's host, nor does / redirect there", async () => {
    const app = await get(h.url, "/app/", { ...HTML, host: ENDPOINT_HOST });
    expect(app.body).not.toContain('<div id="root">');
    expect(app.headers["content-security-policy"]).toBeUndefined();
    const root = await get(h.url, "/", { ...HTML, host: ENDPOINT_HOST });
    expect(root.status).not.toBe(302);
    expect(root.headers.location).toBeUndefined();
  });
});

describe("a control plane whose console is not built", () => {
  let h: Harness;
  let dir: string;
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "cm-console-empty-"));
    h = await startHarness(sqlite, { config: { CONSOLE_DIR: dir } });
  });
  afterAll(async () => {
    await h?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("says how to build it, as a page to a browser and in the error shape to a script, never a 500", async () => {
    const page = await get(h.url, "/app/", HTML);
    expect(page.status).toBe(404);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.body).toContain("npm run build -w @cm/console");
    const json = await get(h.url, "/app/nodes", { accept: "application/json" });
    expect(json.status).toBe(404);
    expect(JSON.parse(json.body).error).toMatchObject({ code: "NOT_FOUND", message: expect.stringContaining("npm run build -w @cm/console") });
  });
});

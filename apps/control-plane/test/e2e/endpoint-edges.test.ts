import net from "node:net";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type System, startSystem, until } from "./support/system";
import { ensureWebImage } from "./support/web-image";

// The public endpoint gateway at its edges, on a real socket in front of a real
// container run by a real agent: what reaches the browser from a container
// whichever forwarding path carries it, how an endpoint may be named, and what
// a kept-alive connection reaches once its deployment is stopped.

/** A raw client connection: what it has read so far, and each next response head as it comes. */
function connect(port: number) {
  const s = net.connect(port, "127.0.0.1");
  const c = {
    s,
    got: "",
    closed: new Promise<void>((r) => s.once("close", () => r())),
    /** Sends a request and answers the head of the response to it (the one after `from`), and the offset past it. */
    async ask(request: string) {
      const from = c.got.length;
      s.write(request);
      await until("a response head", async () => c.got.includes("\r\n\r\n", from), 15_000);
      const end = c.got.indexOf("\r\n\r\n", from);
      return c.got.slice(from, end);
    },
  };
  s.on("data", (d: Buffer) => (c.got += d.toString("latin1")));
  s.on("error", () => {});
  return c;
}

const cookiesOf = (head: string) => [...head.matchAll(/^set-cookie: (.*)$/gim)].map((m) => m[1]);

needs("docker", "busybox").describe("the endpoint gateway at its edges", () => {
  let s: System;
  let token: string;
  let port: number;
  let dep: { id: string; endpoints: Array<{ url: string }> };
  let host: string;
  let apiHost: string;

  const api = (method: string, path: string, body?: unknown) => s.h.call(method, path, { token, ...(body ? { body } : {}) });

  beforeAll(async () => {
    const image = ensureWebImage();
    s = await startSystem(sqlite);
    port = Number(new URL(s.h.url).port);
    apiHost = `127.0.0.1:${port}`;
    await s.agent().start();
    const t = await s.h.signIn();
    token = t.token;
    await s.h.grantCredits(t.user.id, 1_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    // A container that ignores SIGTERM: its stop takes the agent's whole stop timeout (2 s here).
    const created = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080], env: { IGNORE_SIGTERM: "1" } });
    expect(created.status).toBe(201);
    dep = await until(
      "endpoint ready",
      async () => {
        const d = (await api("GET", `/deployments/${created.json.deployment.id}`)).json.deployment;
        if (d.status === "failed") throw new Error(`failed: ${d.statusReason}`);
        return d.status === "running" && d.endpoints[0]?.ready && d;
      },
      60_000,
      s.explain(created.json.deployment.id, token),
    );
    host = new URL(dep.endpoints[0]!.url).host;
    await until("served", async () => {
      const c = connect(port);
      const head = await c.ask(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`).finally(() => c.s.destroy());
      return head.startsWith("HTTP/1.1 200 ");
    });
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  it("keeps a container's cookies to its endpoint host on every path and status", async () => {
    const requests = [
      { name: "200", request: "GET /cookies HTTP/1.1", status: 200 },
      { name: "500", request: "GET /cookies-error HTTP/1.1", status: 500 },
      {
        name: "101",
        request:
          "GET /cookie-ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        status: 101,
      },
      {
        name: "403 to an upgrade",
        request:
          "GET /cookie-refuse HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        status: 403,
      },
    ];
    // A fresh connection goes to the byte relay; one that began with an API request stays with Node's HTTP server.
    for (const afterApi of [false, true])
      for (const r of requests) {
        const where = `${r.name}, ${afterApi ? "after an API request on the connection" : "on a fresh connection"}`;
        const c = connect(port);
        try {
          if (afterApi) expect(await c.ask(`GET /health HTTP/1.1\r\nHost: ${apiHost}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
          const head = await c.ask(`${r.request}\r\nHost: ${host}\r\n\r\n`);
          expect(head, where).toMatch(new RegExp(`^HTTP/1\\.1 ${r.status} `));
          expect(cookiesOf(head), where).toEqual(["toss=1; Path=/", "up=2"]);
        } finally {
          c.s.destroy();
        }
      }
  });

  it("answers one spelling of an endpoint's port only", async () => {
    const [key, portPart] = host.split(".")[0]!.split("-");
    expect(portPart).toBe("8080");
    for (const [label, status] of [
      [`${key}-8080`, 200],
      [`${key}-08080`, 404],
      [`${key}-008080`, 404],
    ] as const) {
      const c = connect(port);
      const head = await c.ask(`GET / HTTP/1.1\r\nHost: ${label}.localhost:${port}\r\nConnection: close\r\n\r\n`).finally(() => c.s.destroy());
      expect(head, label).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    }
  });

  it("answers two Host headers with 400 before the container sees the request", async () => {
    for (const hosts of [
      [host, host],
      [host, apiHost],
      [apiHost, host],
    ]) {
      const c = connect(port);
      const head = await c.ask(`GET /headers HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join("")}\r\n`).finally(() => c.s.destroy());
      expect(head, hosts.join(" + ")).toMatch(/^HTTP\/1\.1 400 /);
    }
  });

  it("closes the deployment's kept-alive connections and WebSockets at its stop, before its container has stopped; an upload on one gets the page, not a reset", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host } });
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    const wsClosed = new Promise<void>((resolve) => ws.once("close", () => resolve()));
    const relayed = connect(port); // its first request is the endpoint's: the byte relay
    const viaHttp = connect(port); // an API request first: Node's HTTP server
    const uploading = Array.from({ length: 10 }, () => connect(port));
    expect(await viaHttp.ask(`GET /health HTTP/1.1\r\nHost: ${apiHost}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);
    for (const c of [relayed, viaHttp, ...uploading]) expect(await c.ask(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 200 /);

    expect((await api("POST", `/deployments/${dep.id}/stop`)).json.deployment.status).toBe("stopping");
    // The container runs on for the stop timeout; nothing through the gateway may reach it now.
    const asked = [relayed, viaHttp].map(async (c) => {
      const head = await c.ask(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      c.s.destroy();
      return { head, page: c.got };
    });
    // A large upload on a kept-alive connection gets the page too, not a reset: the
    // body is read and dropped before the connection closes.
    const size = 2 * 1024 * 1024;
    const uploads = uploading.map(async (c) => {
      let failed: string | undefined;
      c.s.on("error", (e: NodeJS.ErrnoException) => (failed = e.code));
      const from = c.got.length;
      c.s.write(`POST /echo HTTP/1.1\r\nHost: ${host}\r\nContent-Length: ${size}\r\n\r\n`);
      // Half at once, the rest in pieces (slower than loopback, as across a network): bytes in flight when the page is sent.
      c.s.write(Buffer.alloc(size / 2, 1));
      for (let sent = size / 2; sent < size && !c.s.destroyed; sent += 64 * 1024) {
        await new Promise((r) => setTimeout(r, 2));
        c.s.write(Buffer.alloc(64 * 1024, 1));
      }
      await c.closed;
      return { failed, reply: c.got.slice(from) };
    });
    for (const a of await Promise.all(asked)) {
      expect(a.head).toMatch(/^HTTP\/1\.1 404 /);
      expect(a.page).toContain("stopped or was deleted");
    }
    for (const u of await Promise.all(uploads)) {
      expect(u.failed).toBeUndefined();
      expect(u.reply).toMatch(/^HTTP\/1\.1 404 /);
    }
    await wsClosed;
  });
});

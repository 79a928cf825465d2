import http from "node:http";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { type System, startSystem, until } from "./support/system";
import { ensureWebImage } from "./support/web-image";

// The product end to end: a real agent runs a real container for a tenant who
// only talks to the public API, and the container is reached through its
// public endpoint URL over the agent's tunnel.

let image = "";

const inspect = async (id: string) => JSON.parse(await runProgram("docker", ["inspect", id]))[0];
const containersOf = async (deploymentId: string) =>
  (await runProgram("docker", ["ps", "-aq", "--filter", `label=cm.deployment-id=${deploymentId}`])).split("\n").filter(Boolean);

needs("docker", "busybox").describe("the system end to end", () => {
  let s: System;
  let tenant: { token: string; user: { id: string } };
  let dep: { id: string; endpoints: Array<{ url: string; internalPort: number; ready: boolean }> };
  let port: number;

  const api = (method: string, path: string, body?: unknown) => s.h.call(method, path, { token: tenant.token, ...(body ? { body } : {}) });
  const detail = async (id = dep.id) => (await api("GET", `/deployments/${id}`)).json.deployment;
  /** A request to the public endpoint URL: to this listener, with the endpoint's Host. */
  const viaEndpoint = (url: string, path: string, init: { method?: string; body?: Buffer } = {}) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const u = new URL(url);
      const req = http.request({ host: "127.0.0.1", port, path, method: init.method ?? "GET", headers: { host: u.host } }, (res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(parts) }));
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end(init.body);
    });

  beforeAll(async () => {
    image = ensureWebImage();
    s = await startSystem(sqlite);
    port = Number(new URL(s.h.url).port);
    await s.agent().start();
    const t = await s.h.signIn();
    tenant = t;
    await s.h.grantCredits(t.user.id, 1_000);
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  it("brings the node online with the machine's real specs", async () => {
    const node = await until("node online", async () => {
      const n = (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node;
      return n.status === "online" && n.specs.cpuCores > 0 && n;
    });
    const docker = (await runProgram("docker", ["version", "-f", "{{.Server.Version}}"])).trim();
    expect(node.specs).toMatchObject({ containerVersion: docker, cpuThreads: expect.any(Number), ramMb: expect.any(Number) });
    expect(node.specs.ramMb).toBeGreaterThan(100);
    expect(node.gpus).toEqual([]);
  });

  it("runs a deployment: pending to running, with startedAt and a hardened, labelled container", async () => {
    const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080], env: { GREETING: "hi", KEEP_ALIVE_MS: "3000" } });
    expect(r.status).toBe(201);
    // A custom image's disk allowance is the node's default, as its agent told it (AGENT_DISK_DEFAULT_GB unset: 20).
    expect(r.json.deployment).toMatchObject({ status: "pending", endpoints: [], totalCost: 0, diskGb: 20 });
    dep = r.json.deployment;
    const running = await until("running", async () => {
      const d = await detail();
      if (d.status === "failed") throw new Error(`failed: ${d.statusReason}`);
      return d.status === "running" && d;
    });
    expect(Date.parse(running.startedAt)).toBeGreaterThan(0);
    const [id] = await containersOf(dep.id);
    const c = await inspect(id!);
    expect(c.State.Running).toBe(true);
    expect(c.HostConfig.Privileged).toBe(false);
    expect(c.HostConfig.CapDrop).toContain("ALL");
    expect(c.HostConfig.SecurityOpt).toContain("no-new-privileges");
    expect(c.HostConfig.PortBindings ?? {}).toEqual({});
    expect(c.Config.Env).toContain("GREETING=hi");
    expect(c.Config.Labels["cm.user-id"]).toBe(tenant.user.id);
  });

  it("streams the container's logs, with tail and since", async () => {
    const logs = await until("logs", async () => {
      const l = (await api("GET", `/deployments/${dep.id}/logs?tail=1000`)).json.logs as Array<{ message: string; timestamp: string; stream: string }>;
      return l.some((x) => x.message === "listening on 8080") && l.filter((x) => x.message.startsWith("tick")).length >= 5 && l;
    });
    expect(logs[0]).toMatchObject({ stream: "stdout" });
    const ticks = logs.filter((l) => l.message.startsWith("tick")).map((l) => Number(l.message.split(" ")[1]));
    expect(ticks).toEqual(ticks.map((_, i) => ticks[0]! + i));
    const last2 = (await api("GET", `/deployments/${dep.id}/logs?tail=2`)).json.logs;
    expect(last2).toHaveLength(2);
    const since = logs.at(-3)!.timestamp;
    const after = (await api("GET", `/deployments/${dep.id}/logs?tail=1000&since=${encodeURIComponent(since)}`)).json.logs;
    expect(after.length).toBeGreaterThanOrEqual(3);
    expect(after.every((l: { timestamp: string }) => Date.parse(l.timestamp) >= Date.parse(since) - 1)).toBe(true);
  });

  it("gives the running deployment an endpoint URL that reaches the container through the tunnel", async () => {
    const d = await until(
      "endpoint ready",
      async () => {
        const x = await detail();
        return x.endpoints.length === 1 && x.endpoints[0].ready && x;
      },
      undefined,
      s.explain(dep.id, tenant.token),
    );
    expect(d.endpoints[0]).toMatchObject({ type: "https", internalPort: 8080 });
    expect(d.endpoints[0].url).toMatch(new RegExp(`^http://[a-z2-7]{16}-8080\\.localhost:${port}$`));
    dep = d;
    const r = await viaEndpoint(d.endpoints[0].url, "/");
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe("hello from the container");
    const h = JSON.parse((await viaEndpoint(d.endpoints[0].url, "/headers")).body.toString());
    expect(h["x-forwarded-for"]).toBe("127.0.0.1");
    expect(h["x-forwarded-host"]).toBe(new URL(d.endpoints[0].url).host);
  });

  it("keeps answering after the container closed idle keep-alive connections", async () => {
    // The container closes a connection idle for 3 s; the next request must get a
    // fresh tunnel, not a 502 from the closed one (it did: the closed tunnel stayed
    // in the gateway's keep-alive pool).
    const url = dep.endpoints[0]!.url;
    // New client connections each time: only the gateway's own pool of tunnels is under test.
    const client = new http.Agent({ keepAlive: false });
    const get = () =>
      new Promise<number>((resolve, reject) => {
        http
          .get({ host: "127.0.0.1", port, path: "/", headers: { host: new URL(url).host }, agent: client }, (res) => {
            res.resume();
            res.on("end", () => resolve(res.statusCode!));
          })
          .on("error", reject);
      });
    try {
      expect(await Promise.all([get(), get(), get()])).toEqual([200, 200, 200]);
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      expect(await Promise.all([get(), get(), get()])).toEqual([200, 200, 200]);
    } finally {
      client.destroy();
    }
  });

  it("carries a large upload, a large download, server-sent events and a WebSocket", async () => {
    const url = dep.endpoints[0]!.url;
    const body = Buffer.alloc(32 * 1024 * 1024, 3);
    expect(JSON.parse((await viaEndpoint(url, "/echo", { method: "POST", body })).body.toString())).toEqual({ bytes: body.length, method: "POST" });
    expect((await viaEndpoint(url, "/big")).body.length).toBe(16 * 1024 * 1024);

    const arrivals: number[] = [];
    await new Promise<void>((resolve) => {
      http.get({ host: "127.0.0.1", port, path: "/sse", headers: { host: new URL(url).host } }, (res) => {
        res.on("data", () => arrivals.push(Date.now()));
        res.on("end", resolve);
      });
    });
    expect(arrivals.length).toBeGreaterThanOrEqual(3);
    expect(arrivals.at(-1)! - arrivals[0]!).toBeGreaterThanOrEqual(200);

    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, { headers: { host: new URL(url).host } });
    await new Promise((r, j) => (ws.once("open", r), ws.once("error", j)));
    const echoed = new Promise<string>((r) => ws.once("message", (m) => r(m.toString())));
    ws.send("through the agent and back");
    expect(await echoed).toBe("through the agent and back");
    ws.close();
  });

  it("exposes a custom image's EXPOSE ports when the tenant names none", async () => {
    const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image });
    expect(r.json.deployment.ports).toEqual([]);
    const d = await until(
      "endpoint from EXPOSE",
      async () => {
        const x = await detail(r.json.deployment.id);
        return x.endpoints[0]?.ready && x;
      },
      undefined,
      s.explain(r.json.deployment.id, tenant.token),
    );
    expect(d.ports).toEqual([8080]);
    expect(d.endpoints).toHaveLength(1);
    await until("served", async () => (await viaEndpoint(d.endpoints[0].url, "/")).status === 200);
    await api("DELETE", `/deployments/${d.id}`);
  });

  it("answers 200 concurrent requests", async () => {
    const rs = await Promise.all(Array.from({ length: 200 }, () => viaEndpoint(dep.endpoints[0]!.url, "/")));
    expect(rs.filter((r) => r.status === 200 && r.body.toString() === "hello from the container")).toHaveLength(200);
  });

  it("answers unknown hosts with a 404 page", async () => {
    const r = await viaEndpoint(`http://aaaaaaaaaaaaaaaa-8080.localhost:${port}`, "/");
    expect(r.status).toBe(404);
    expect(r.headers["content-type"]).toContain("text/html");
  });

  it("survives an agent restart: the container keeps running and logs resume without loss or duplicates", async () => {
    const [id] = await containersOf(dep.id);
    const startedAt = (await inspect(id!)).State.StartedAt;
    const before = (await api("GET", `/deployments/${dep.id}/logs?tail=10000`)).json.logs.length;
    // Stop the agent as SIGTERM does, then start a fresh one on the same Docker.
    await s.stopAgents();
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await inspect(id!)).State.Running).toBe(true);
    await s.agent().start();
    await until("more logs", async () => (await api("GET", `/deployments/${dep.id}/logs?tail=10000`)).json.logs.length > before + 10);
    expect((await inspect(id!)).State.StartedAt).toBe(startedAt);
    const ticks = (await api("GET", `/deployments/${dep.id}/logs?tail=10000`)).json.logs
      .filter((l: { message: string }) => l.message.startsWith("tick"))
      .map((l: { message: string }) => Number(l.message.split(" ")[1]));
    expect(ticks).toEqual(ticks.map((_: number, i: number) => ticks[0] + i));
    expect((await detail()).status).toBe("running");
  });

  it("stops, starts and deletes for real; a stopped deployment's endpoint says so", async () => {
    const url = dep.endpoints[0]!.url;
    expect((await api("POST", `/deployments/${dep.id}/stop`)).json.deployment.status).toMatch(/stopping|stopped/);
    await until("stopped", async () => (await detail()).status === "stopped");
    const [id] = await containersOf(dep.id);
    expect((await inspect(id!)).State.Running).toBe(false);
    expect((await detail()).endpoints).toEqual([]);
    const gone = await viaEndpoint(url, "/");
    expect(gone.status).toBe(404);
    expect(gone.body.toString()).toContain("stopped or was deleted");

    expect((await api("POST", `/deployments/${dep.id}/start`)).json.deployment.status).toBe("starting");
    await until("running again", async () => (await detail()).status === "running");
    await until("endpoint back", async () => (await viaEndpoint(url, "/")).status === 200);

    const cost = (await detail()).totalCost;
    expect(cost).toBeGreaterThan(0);
    expect((await api("DELETE", `/deployments/${dep.id}`)).json.success).toBe(true);
    await until("container removed", async () => (await containersOf(dep.id)).length === 0);
    expect((await api("GET", `/deployments/${dep.id}`)).status).toBe(404);
    const usage = (await api("GET", "/credits/transactions?type=usage&limit=100")).json.transactions.filter(
      (t: { deploymentId: string }) => t.deploymentId === dep.id,
    );
    expect(usage.length).toBeGreaterThan(0);
    expect(usage.every((t: { amount: number }) => t.amount < 0)).toBe(true);
    // The ledger charged at least what the deployment showed before delete settled the rest.
    const charged = -usage.reduce((a: number, t: { amount: number }) => a + t.amount, 0);
    expect(charged).toBeGreaterThanOrEqual(cost);
  });

  it("reports a missing image as a failure the tenant can read", async () => {
    const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: "cm-test-does-not-exist:1" });
    const d = await until("failed", async () => {
      const x = await detail(r.json.deployment.id);
      return x.status === "failed" && x;
    });
    expect(d.statusReason).toMatch(/cm-test-does-not-exist:1/);
  });

  it("answers 503 with Retry-After while the node's agent is away", async () => {
    const r = await api("POST", "/deployments", { nodeId: s.nodeId, customImage: image, ports: [8080] });
    const d = await until(
      "running",
      async () => {
        const x = await detail(r.json.deployment.id);
        return x.status === "running" && x.endpoints[0]?.ready && x;
      },
      undefined,
      s.explain(r.json.deployment.id, tenant.token),
    );
    await s.stopAgents();
    const away = await viaEndpoint(d.endpoints[0].url, "/");
    expect(away.status).toBe(503);
    expect(away.headers["retry-after"]).toBeDefined();
  });
});

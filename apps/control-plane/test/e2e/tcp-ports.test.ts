import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import { join } from "node:path";
import { TCP_CLOSE_CODES, TCP_MAX_CONNECTIONS_PER_DEPLOYMENT, TCP_SUBPROTOCOL } from "@cm/protocol";
import { describeEachDatabase, needs, sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { ENTRY, ROOT, TSX, terminal } from "../../../cli/test/support/cli";
import { DialError } from "../../src/gateway/ports";
import { type System, startSystem, until } from "./support/system";

// Raw TCP ports end to end (issue 30): a deployment declares tcpPorts, and the
// real `cm port-forward` carries local connections to a TCP echo server in a
// real container (busybox nc), through the real control plane and agent, with
// no inbound port on the node. No sshd is in reach here (busybox has none), so
// cm ssh is shown carrying ssh's own bytes to the echo server and back.

const ECHO = "nc -ll -p 7000 -e cat";

/**
 * A long-running cm, its stdout and stderr as they come. In a process group of
 * its own, so that a signal reaches cm itself (tsx runs it in a child) and what
 * it started (ssh, and ssh's ProxyCommand), as a terminal's would.
 */
function cmProcess(home: string, args: string[]) {
  const child: ChildProcessWithoutNullStreams = spawn(TSX, [ENTRY, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: home, XDG_CONFIG_HOME: join(home, ".config"), NO_COLOR: "1" },
    detached: true,
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c));
  child.stderr.on("data", (c: Buffer) => (stderr += c));
  const exited = new Promise<number>((resolve) => child.once("exit", (code) => resolve(code ?? -1)));
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, name);
    } catch {
      // already gone
    }
  };
  return { child, exited, signal, stdout: () => stdout, stderr: () => stderr };
}

/** Connects to the forwarded port, sends `data` and reads until as many bytes came back. */
function echo(port: number, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    const parts: Buffer[] = [];
    let got = 0;
    socket.on("data", (c: Buffer) => {
      parts.push(c);
      got += c.length;
      if (got >= data.length) {
        socket.end();
        resolve(Buffer.concat(parts));
      }
    });
    socket.once("error", reject);
    socket.once("close", () => got < data.length && reject(new Error(`closed after ${got} of ${data.length} bytes`)));
    socket.write(data);
  });
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

needs("docker", "busybox").describe("TCP ports through the control plane, with the real cm", () => {
  describeEachDatabase("on $name", (db) => {
    let s: System;
    let t: ReturnType<typeof terminal>;
    let tenantToken = "";
    let id = "";
    let forwarded: ReturnType<typeof cmProcess> | undefined;
    let localPort = 0;

    beforeAll(async () => {
      ensureScriptImage();
      s = await startSystem(db);
      await s.agent().start();
      t = terminal({ CM_API_URL: s.h.url });
      t.keypair();
      expect((await t.cm(["login"])).code).toBe(0);
      const me = JSON.parse((await t.cm(["whoami", "--json"])).stdout).user.id;
      await s.h.grantCredits(me, 1_000);
      tenantToken = (await t.cm(["token"])).stdout.trim();
      await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
      const r = await t.cm(["deploy", "--image", ensureScriptImage(), "--node", s.nodeId, "--env", `SCRIPT=${ECHO}`, "--tcp-port", "7000", "--wait"]);
      expect(r.code, r.stderr).toBe(0);
      id = r.stdout.trim();
      forwarded = cmProcess(t.home, ["--api", s.h.url, "port-forward", id, "0:7000"]);
      localPort = Number(
        await until(
          "cm port-forward listening",
          async () => /Forwarding from 127\.0\.0\.1:(\d+) /.exec(forwarded!.stdout())?.[1],
          60_000,
          async () => forwarded!.stderr(),
        ),
      );
    }, 240_000);
    afterAll(async () => {
      forwarded?.signal("SIGINT");
      t?.close();
      await s?.close();
    }, 60_000);

    it("shows tcpPorts on the deployment, apart from its HTTP ports and endpoints", async () => {
      const d = (await s.h.call("GET", `/deployments/${id}`, { token: tenantToken })).json.deployment;
      expect(d).toMatchObject({ status: "running", tcpPorts: [7000], ports: [], endpoints: [] });
      const shown = await t.cm(["show", id]);
      expect(shown.stdout).toMatch(/tcp ports:\s+7000/);
    });

    it("carries a connection to the container's echo server and back", async () => {
      const back = await echo(localPort, Buffer.from("hello through the tunnel\n"));
      expect(back.toString()).toBe("hello through the tunnel\n");
    });

    it("carries a few MB intact, on two connections at once", async () => {
      const a = randomBytes(4 * 1024 * 1024);
      const b = randomBytes(1024 * 1024);
      const [ra, rb] = await Promise.all([echo(localPort, a), echo(localPort, b)]);
      expect(ra.length).toBe(a.length);
      expect(sha(ra)).toBe(sha(a));
      expect(sha(rb)).toBe(sha(b));
    }, 120_000);

    it("cm port-forward --stdio carries stdin and stdout (ssh's ProxyCommand)", async () => {
      const p = cmProcess(t.home, ["--api", s.h.url, "port-forward", id, "--stdio", "7000"]);
      p.child.stdin.write("over stdio\n");
      await until(
        "the echo on stdout",
        async () => p.stdout() === "over stdio\n",
        30_000,
        async () => `stdout: ${JSON.stringify(p.stdout())}\nstderr: ${p.stderr()}`,
      );
      p.signal("SIGHUP");
      await p.exited;
    }, 60_000);

    needs("ssh").it(
      "cm ssh runs ssh with cm port-forward --stdio as its ProxyCommand: ssh's bytes reach the container and come back",
      async () => {
        // The echo server answers ssh's own version line: ssh reads it as the server's, which only the way through can have carried.
        const p = cmProcess(t.home, [
          "--api",
          s.h.url,
          "ssh",
          id,
          "--port",
          "7000",
          "--",
          "-v",
          "-o",
          "BatchMode=yes",
          "-o",
          "StrictHostKeyChecking=no",
          "-o",
          "UserKnownHostsFile=/dev/null",
        ]);
        // What comes after (its own key exchange, echoed) goes nowhere: the banner is the proof.
        await until(
          "ssh's banner echoed",
          async () => /remote software version OpenSSH/.test(p.stderr()),
          60_000,
          async () => p.stderr(),
        );
        expect(p.stderr()).toMatch(/Executing proxy command: .* port-forward .* --stdio 7000/);
        p.signal("SIGTERM");
        await p.exited;
      },
      120_000,
    );

    it("refuses a port the deployment did not declare: cm says why, and the agent too would refuse it", async () => {
      const r = await t.cm(["port-forward", id, "0:7001"]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^error TCP_PORT_NOT_DECLARED: deployment \S+ declares no TCP port 7001 \(its tcpPorts: 7000\)/);
      const plain = await s.h.call("GET", `/deployments/${id}/tcp/7001`, { token: tenantToken });
      expect(plain.status).toBe(404);
      expect(plain.json.error).toMatchObject({ code: "TCP_PORT_NOT_DECLARED", details: { tcpPorts: [7000] } });
      // Past the control plane's check, the node's agent opens tunnels only to the ports the container was given.
      const dialled = await s.h.deps.tunnels.dial({ nodeId: s.nodeId, deploymentId: id, port: 7001 }).catch((e: unknown) => e);
      expect(dialled).toBeInstanceOf(DialError);
      expect((dialled as DialError).message).toMatch(/port 7001 is not exposed/);
    });

    it("refuses another tenant, before and at the upgrade", async () => {
      const other = await s.h.signIn();
      const plain = await s.h.call("GET", `/deployments/${id}/tcp/7000`, { token: other.token });
      expect(plain.status).toBe(404);
      expect(plain.json.error.code).toBe("DEPLOYMENT_NOT_FOUND");
      const status = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${s.h.url.replace(/^http/, "ws")}/deployments/${id}/tcp/7000`, [TCP_SUBPROTOCOL], {
          headers: { authorization: `Bearer ${other.token}` },
        });
        ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.once("open", () => reject(new Error("another tenant's upgrade was accepted")));
        ws.once("error", () => undefined);
      });
      expect(status).toBe(404);
      // And the owner without an upgrade is told to upgrade, nothing dialled.
      const owner = await s.h.call("GET", `/deployments/${id}/tcp/7000`, { token: tenantToken });
      expect(owner.status).toBe(426);
    });

    it("refuses at create a port that is both an HTTP port and a TCP port, and more than the bound", async () => {
      const both = await s.h.call("POST", "/deployments", {
        token: tenantToken,
        body: { nodeId: s.nodeId, customImage: ensureScriptImage(), ports: [8080], tcpPorts: [22, 8080] },
      });
      expect(both.status).toBe(400);
      expect(both.json.error).toMatchObject({ code: "VALIDATION_ERROR", details: [{ field: "tcpPorts" }] });
      const many = await s.h.call("POST", "/deployments", {
        token: tenantToken,
        body: { nodeId: s.nodeId, customImage: ensureScriptImage(), tcpPorts: [1, 2, 3, 4, 5, 6, 7, 8, 9] },
      });
      expect(many.status).toBe(400);
      expect(many.json.error.code).toBe("VALIDATION_ERROR");
    });

    it("stopping the deployment closes the forwarded connection, and cm says why", async () => {
      const socket = net.connect(localPort, "127.0.0.1");
      socket.on("error", () => undefined);
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      socket.write("still here\n");
      await new Promise<void>((resolve) => socket.once("data", () => resolve()));
      const stopped = await t.cm(["stop", id]);
      expect(stopped.code, stopped.stderr).toBe(0);
      await closed;
      await until(
        "cm's note",
        async () => /connection ended \(4500: deployment (stopping|stopped)\)/.test(forwarded!.stderr()),
        30_000,
        async () => forwarded!.stderr(),
      );
      // A new connection is refused now that it is not running: the local socket is closed at once.
      const after = await t.cm(["port-forward", id, "0:7000"]);
      expect(after.code, after.stderr).toBe(1);
      expect(after.stderr).toMatch(/^error INVALID_STATE_TRANSITION: cannot connect to a deployment that is (stopping|stopped)/);
    }, 90_000);
  });
});

needs("docker", "busybox").describe("a TCP connection's bounds, with the real control plane and agent", () => {
  let s: System;
  let tenant: { token: string; refreshToken: string; user: { id: string } };
  let id = "";
  const wsUrl = () => `${s.h.url.replace(/^http/, "ws")}/deployments/${id}/tcp/7000`;

  /** A client's connection, open; resolves its close code when it ends. */
  async function connect(token = tenant.token) {
    const ws = new WebSocket(wsUrl(), [TCP_SUBPROTOCOL], { headers: { authorization: `Bearer ${token}` } });
    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
    });
    return { ws, closed };
  }

  beforeAll(async () => {
    ensureScriptImage();
    // An idle timeout short enough to wait for: the tunnels' (GATEWAY_IDLE_TIMEOUT_MS) is the TCP connections' too.
    s = await startSystem(sqliteDatabase, { GATEWAY_IDLE_TIMEOUT_MS: 2_000 });
    await s.agent().start();
    tenant = await s.h.signIn();
    await s.h.grantCredits(tenant.user.id, 1_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    const r = await s.h.call("POST", "/deployments", {
      token: tenant.token,
      body: { nodeId: s.nodeId, customImage: ensureScriptImage(), env: { SCRIPT: ECHO }, tcpPorts: [7000] },
    });
    expect(r.status, r.text).toBe(201);
    id = r.json.deployment.id;
    await until("running", async () => (await s.h.call("GET", `/deployments/${id}`, { token: tenant.token })).json.deployment.status === "running", 60_000);
    // Running is the container started: the echo server may listen a moment later.
    await until("the echo server listening", async () => {
      const c = await connect();
      c.ws.close();
      return true;
    });
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  it("ends a connection with no byte either way for the idle timeout (4408), and not one in use", async () => {
    const quiet = await connect();
    const busy = await connect();
    let echoed = 0;
    busy.ws.on("message", () => echoed++);
    const ticker = setInterval(() => busy.ws.send(Buffer.from("tick\n")), 500);
    expect(await quiet.closed).toBe(TCP_CLOSE_CODES.IDLE);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    clearInterval(ticker);
    expect(busy.ws.readyState).toBe(WebSocket.OPEN);
    expect(echoed).toBeGreaterThan(4);
    busy.ws.close();
  });

  it(`takes ${TCP_MAX_CONNECTIONS_PER_DEPLOYMENT} connections per deployment at once, and refuses the next with 429 RATE_LIMITED`, async () => {
    const open = await Promise.all(Array.from({ length: TCP_MAX_CONNECTIONS_PER_DEPLOYMENT }, () => connect()));
    const next = await s.h.call("GET", `/deployments/${id}/tcp/7000`, { token: tenant.token });
    expect(next.status).toBe(429);
    expect(next.json.error).toMatchObject({ code: "RATE_LIMITED", details: { limit: TCP_MAX_CONNECTIONS_PER_DEPLOYMENT } });
    await expect(connect()).rejects.toThrow("refused: 429");
    for (const c of open) c.ws.close();
    await Promise.all(open.map((c) => c.closed));
    // Each slot is free again once its connection closed.
    await until("a slot free", async () => (await s.h.call("GET", `/deployments/${id}/tcp/7000`, { token: tenant.token })).status === 426);
  });

  it("ends a connection when its sign-in is signed out (4401)", async () => {
    const c = await connect();
    expect((await s.h.call("POST", "/auth/logout", { body: { refreshToken: tenant.refreshToken } })).status).toBe(200);
    expect(await c.closed).toBe(TCP_CLOSE_CODES.UNAUTHORIZED);
  });
});

import { EXEC_SUBPROTOCOL } from "@cm/protocol";
import { needs, sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { ensureScriptImage } from "../../../agent/test/support/script-image";
import { type System, startSystem, until } from "./support/system";

// A shell in a tenant's container (GET /deployments/{id}/exec), end to end: a
// client WebSocket to the real control plane, relayed through a real agent to
// docker exec in a real container, with no inbound port on the node.

type Session = {
  ws: WebSocket;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code, the error message if one came, and the close code. */
  done: Promise<{ exit?: number; error?: { code: string; message: string }; closeCode: number }>;
  stdin(text: string): void;
  control(message: object): void;
};

needs("docker", "busybox").describe("exec in a deployment's container", () => {
  let s: System;
  let tenant: { token: string; user: { id: string } };
  let depId = "";
  let base = "";

  const api = (method: string, path: string, token = tenant.token) => s.h.call(method, path, { token });

  /** Opens a session as a client would; `start` is sent once the socket is open. */
  function exec(id: string, start: object | undefined, auth: { header?: string; protocols?: string[] } = { header: `Bearer ${tenant.token}` }): Session {
    const ws = new WebSocket(`${base}/deployments/${id}/exec`, auth.protocols ?? [EXEC_SUBPROTOCOL], {
      headers: auth.header ? { authorization: auth.header } : {},
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let exit: number | undefined;
    let error: { code: string; message: string } | undefined;
    ws.on("message", (data: Buffer, isBinary) => {
      if (isBinary) return void (data[0] === 1 ? out : err).push(data.subarray(1));
      const m = JSON.parse(String(data));
      if (m.type === "exit") exit = m.code;
      if (m.type === "error") error = { code: m.code, message: m.message };
    });
    if (start) ws.once("open", () => ws.send(JSON.stringify({ type: "start", ...start })));
    const done = new Promise<Awaited<Session["done"]>>((resolve, reject) => {
      ws.once("close", (closeCode) => resolve({ ...(exit !== undefined ? { exit } : {}), ...(error ? { error } : {}), closeCode }));
      ws.once("unexpected-response", (_req, res) => reject(new Error(`refused: ${res.statusCode}`)));
    });
    return {
      ws,
      stdout: () => Buffer.concat(out).toString(),
      stderr: () => Buffer.concat(err).toString(),
      done,
      stdin: (text) => ws.send(Buffer.concat([Buffer.from([0]), Buffer.from(text)])),
      control: (message) => ws.send(JSON.stringify(message)),
    };
  }

  /** The plain HTTP answer to an upgrade the control plane refuses. */
  function refusal(id: string, headers: Record<string, string>): Promise<{ status: number; body: { error: { code: string; requestId: string } } }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${base}/deployments/${id}/exec`, [EXEC_SUBPROTOCOL], { headers });
      ws.once("unexpected-response", (_req, res) => {
        const parts: Buffer[] = [];
        res.on("data", (c: Buffer) => parts.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(parts).toString()) }));
      });
      ws.once("open", () => reject(new Error("the upgrade was accepted")));
      ws.once("error", () => undefined);
    });
  }

  async function deploy(script: string) {
    const r = await s.h.call("POST", "/deployments", {
      token: tenant.token,
      body: { nodeId: s.nodeId, customImage: ensureScriptImage(), env: { SCRIPT: script } },
    });
    expect(r.status, r.text).toBe(201);
    const id = r.json.deployment.id as string;
    await until("running", async () => (await api("GET", `/deployments/${id}`)).json.deployment.status === "running", 60_000, s.explain(id, tenant.token));
    return id;
  }

  beforeAll(async () => {
    ensureScriptImage();
    s = await startSystem(sqlite);
    base = s.h.url.replace(/^http/, "ws");
    await s.agent().start();
    tenant = await s.h.signIn();
    await s.h.grantCredits(tenant.user.id, 1_000);
    await until("node online", async () => (await s.h.call("GET", `/nodes/${s.nodeId}`)).json.node.status === "online");
    depId = await deploy("sleep 3600");
  }, 120_000);
  afterAll(() => s?.close(), 60_000);

  it("runs a command: stdout and stderr apart, stdin piped to it, its exit code", async () => {
    const e = exec(depId, { command: ["sh", "-c", "read line; echo got $line; echo oops >&2; exit 3"] });
    e.ws.once("open", () => {
      e.stdin("hello\n");
      e.control({ type: "stdin_end" });
    });
    const end = await e.done;
    expect(end).toEqual({ exit: 3, closeCode: 1000 });
    expect(e.stdout()).toBe("got hello\n");
    expect(e.stderr()).toBe("oops\n");
  });

  it("a command that reads stdin to its end gets it all, and end of file", async () => {
    const e = exec(depId, { command: ["sh", "-c", "cat | wc -c"] });
    const chunk = "x".repeat(64 * 1024);
    e.ws.once("open", () => {
      for (let i = 0; i < 16; i++) e.stdin(chunk);
      e.control({ type: "stdin_end" });
    });
    expect(await e.done).toEqual({ exit: 0, closeCode: 1000 });
    expect(e.stdout().trim()).toBe(String(16 * 64 * 1024));
  });

  it("carries bytes as they are, both ways: all 256 values, not UTF-8, through cat", async () => {
    const e = exec(depId, { command: ["cat"] });
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7) % 256));
    const out: Buffer[] = [];
    e.ws.on("message", (data: Buffer, isBinary) => isBinary && data[0] === 1 && out.push(data.subarray(1)));
    e.ws.once("open", () => {
      e.ws.send(Buffer.concat([Buffer.from([0]), bytes]));
      e.control({ type: "stdin_end" });
    });
    expect(await e.done).toEqual({ exit: 0, closeCode: 1000 });
    expect(Buffer.concat(out).equals(bytes)).toBe(true);
  });

  it("an interactive shell with a tty: typed input echoes, the terminal is sized and resized, exit 5 ends it", async () => {
    const e = exec(depId, { command: ["sh"], tty: true, cols: 100, rows: 30 });
    await new Promise((r) => e.ws.once("open", r));
    e.stdin("stty size\r");
    await until("the size", async () => e.stdout().includes("30 100"), 10_000);
    e.stdin("echo typed-$((40+2))\r");
    // The tty echoes what was typed, then the shell's output.
    await until("the echo and the output", async () => e.stdout().includes("echo typed-$((40+2))") && e.stdout().includes("typed-42"), 10_000);
    e.control({ type: "resize", cols: 120, rows: 40 });
    e.stdin("stty size\r");
    await until("the new size", async () => e.stdout().includes("40 120"), 10_000);
    e.stdin("exit 5\r");
    expect(await e.done).toEqual({ exit: 5, closeCode: 1000 });
    // A tty merges everything onto stdout.
    expect(e.stderr()).toBe("");
  });

  it("Ctrl-C from a tty reaches the command in the container", async () => {
    const e = exec(depId, {
      command: ["sh", "-c", "trap 'echo caught-int; exit 7' INT; echo ready; while :; do sleep 0.1; done"],
      tty: true,
      cols: 80,
      rows: 24,
    });
    await until("ready", async () => e.stdout().includes("ready"), 10_000);
    e.stdin("\x03");
    expect(await e.done).toEqual({ exit: 7, closeCode: 1000 });
    expect(e.stdout()).toContain("caught-int");
  });

  it("takes the token as a subprotocol, for browsers, and never echoes it", async () => {
    const e = exec(depId, { command: ["echo", "via-protocol"] }, { protocols: [EXEC_SUBPROTOCOL, `bearer.${tenant.token}`] });
    const upgrade = await new Promise<{ headers: Record<string, unknown> }>((r) => e.ws.once("upgrade", r));
    expect(upgrade.headers["sec-websocket-protocol"]).toBe(EXEC_SUBPROTOCOL);
    expect(upgrade.headers["x-request-id"]).toMatch(/^req_/);
    expect(await e.done).toEqual({ exit: 0, closeCode: 1000 });
    expect(e.stdout()).toBe("via-protocol\n");
  });

  it("refuses before the upgrade, in the API's error shape: no token, someone else's deployment, a plain GET", async () => {
    const none = await refusal(depId, {});
    expect(none.status).toBe(401);
    expect(none.body.error).toMatchObject({ code: "UNAUTHORIZED", requestId: expect.stringMatching(/^req_/) });

    const other = await s.h.signIn();
    const theirs = await refusal(depId, { authorization: `Bearer ${other.token}` });
    expect(theirs.status).toBe(404);
    expect(theirs.body.error.code).toBe("DEPLOYMENT_NOT_FOUND");

    const plain = await api("GET", `/deployments/${depId}/exec`);
    expect(plain.status).toBe(426);
    expect(plain.json.error.code).toBe("UPGRADE_REQUIRED");
  });

  it("answers a bad first message with BAD_MESSAGE and close 4400", async () => {
    const e = exec(depId, { command: [] });
    const end = await e.done;
    expect(end.closeCode).toBe(4400);
    expect(end.error?.code).toBe("BAD_MESSAGE");
  });

  it("ends the session when the deployment is stopped, and refuses exec while it is not running (409)", async () => {
    const id = await deploy("sleep 3600");
    const e = exec(id, { command: ["sh", "-c", "echo started; sleep 600"] });
    await until("started", async () => e.stdout().includes("started"), 10_000);
    expect((await api("POST", `/deployments/${id}/stop`)).status).toBe(200);
    const end = await e.done;
    expect(end.exit).toBeUndefined();
    expect(end.closeCode).toBe(4500);
    expect(end.error?.code).toBe("SESSION_ENDED");

    await until("stopped", async () => (await api("GET", `/deployments/${id}`)).json.deployment.status === "stopped", 30_000);
    const stopped = await refusal(id, { authorization: `Bearer ${tenant.token}` });
    expect(stopped.status).toBe(409);
    expect(stopped.body.error).toMatchObject({ code: "INVALID_STATE_TRANSITION", details: { currentStatus: "stopped" } });
  }, 60_000);
});

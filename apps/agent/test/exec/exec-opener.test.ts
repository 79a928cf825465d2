import http from "node:http";
import type { AddressInfo } from "node:net";
import { AGENT_EXEC_PATH } from "@cm/protocol";
import { afterEach, beforeEach, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { systemClock } from "../../src/clock";
import { ExecOpener } from "../../src/exec/exec-opener";
import { silentLogger } from "../../src/logger";
import { ownRunningContainer } from "../../src/reconcile/own-container";
import { MemoryRuntime } from "../support/memory-runtime";

// The agent's half of `cm exec`, without Docker: it connects back to the control
// plane (a WebSocket server on port 0 here) and enters only the running
// container of the deployment it was asked for.

const AGENT_LABELS = { "cm.agent": "a" };
let server: http.Server;
let wss: WebSocketServer;
let runtime: MemoryRuntime;
let opener: ExecOpener;
/** Each connection the agent opened: its path, its Authorization header, and the socket. */
let dialled: Array<{ url: string; authorization: string | undefined; ws: WebSocket; messages: Array<{ data: Buffer; isBinary: boolean }> }>;

beforeEach(async () => {
  dialled = [];
  wss = new WebSocketServer({ noServer: true });
  server = http.createServer();
  server.on("upgrade", (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      const entry = { url: req.url ?? "", authorization: req.headers.authorization, ws, messages: [] as Array<{ data: Buffer; isBinary: boolean }> };
      ws.on("message", (data: Buffer, isBinary) => entry.messages.push({ data, isBinary }));
      dialled.push(entry);
    }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  runtime = new MemoryRuntime(systemClock).loadImage("app:1");
  opener = new ExecOpener({
    httpUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token: "agent-token",
    runtime,
    // This agent: node_1, its containers labelled cm.agent=a.
    runningContainer: (id) => ownRunningContainer(runtime, { labels: AGENT_LABELS, nodeId: "node_1" }, id),
    logger: silentLogger,
  });
});
afterEach(async () => {
  opener.closeAll();
  wss.close();
  await new Promise((r) => server.close(r));
});

async function runContainer(deploymentId: string, made: { nodeId: string; labels: Record<string, string> } = { nodeId: "node_1", labels: AGENT_LABELS }) {
  const id = await runtime.createContainer({
    deploymentId,
    nodeId: made.nodeId,
    userId: "usr_1",
    image: "app:1",
    env: {},
    exposedPorts: [],
    cpuCores: 1,
    memoryMb: 64,
    gpuDeviceIds: [],
    labels: made.labels,
  });
  await runtime.start(id);
  return id;
}
const closed = (ws: WebSocket) => new Promise<number>((r) => ws.once("close", r));
const texts = (e: (typeof dialled)[number]) => e.messages.filter((m) => !m.isBinary).map((m) => JSON.parse(String(m.data)));

it("refuses a deployment that has no running container on this node, and runs nothing", async () => {
  await runContainer("dep_mine");
  await opener.openExec({ type: "open_exec", execId: "x1", deploymentId: "dep_other", command: ["sh"], tty: false });
  expect(dialled).toHaveLength(1);
  const [e] = dialled;
  expect(e!.url).toBe(`${AGENT_EXEC_PATH}?id=x1`);
  expect(e!.authorization).toBe("Bearer agent-token");
  expect(await closed(e!.ws)).toBe(4500);
  expect(texts(e!)).toEqual([{ type: "error", code: "EXEC_REFUSED", message: "deployment dep_other has no running container on this node" }]);
  expect(runtime.execs).toHaveLength(0);
});

it("refuses the deployment's container that another agent on the same engine made (another node, or without this agent's labels)", async () => {
  await runContainer("dep_theirs", { nodeId: "node_2", labels: AGENT_LABELS });
  await runContainer("dep_unlabelled", { nodeId: "node_1", labels: {} });
  for (const deploymentId of ["dep_theirs", "dep_unlabelled"]) {
    await opener.openExec({ type: "open_exec", execId: `x-${deploymentId}`, deploymentId, command: ["sh"], tty: false });
    const e = dialled.at(-1)!;
    expect(await closed(e.ws)).toBe(4500);
    expect(texts(e)).toEqual([{ type: "error", code: "EXEC_REFUSED", message: `deployment ${deploymentId} has no running container on this node` }]);
  }
  expect(runtime.execs).toHaveLength(0);
});

it("runs the command in the deployment's container: stdin in, output out, the size, then the exit code", async () => {
  await runContainer("dep_other");
  const mine = await runContainer("dep_mine");
  const opening = opener.openExec({ type: "open_exec", execId: "x2", deploymentId: "dep_mine", command: ["cat"], tty: true, cols: 80, rows: 24 });
  await new Promise((r) => setTimeout(r, 50));
  const [e] = dialled;
  e!.ws.send(Buffer.from([0, ...Buffer.from("hi")]));
  e!.ws.send(JSON.stringify({ type: "resize", cols: 120, rows: 40 }));
  e!.ws.send(JSON.stringify({ type: "stdin_end" }));
  await opening;
  expect(await closed(e!.ws)).toBe(1000);
  expect(runtime.execs).toHaveLength(1);
  expect(runtime.execs[0]).toMatchObject({
    command: ["cat"],
    tty: true,
    sizes: [
      { cols: 80, rows: 24 },
      { cols: 120, rows: 40 },
    ],
  });
  expect(runtime.container(mine).state.running).toBe(true);
  const output = e!.messages.filter((m) => m.isBinary).map((m) => [m.data[0], m.data.subarray(1).toString()]);
  expect(output).toEqual([[1, "hi"]]);
  expect(texts(e!)).toEqual([{ type: "exit", code: 0 }]);
});

it("reads no more than a little of the client's input while the command is being started", async () => {
  await runContainer("dep_mine");
  // The engine takes its time starting the command (a busy daemon).
  let started!: () => void;
  const starting = new Promise<void>((r) => (started = r));
  const exec = runtime.exec.bind(runtime);
  runtime.exec = async (id, options) => {
    await starting;
    return exec(id, options);
  };
  const opening = opener.openExec({ type: "open_exec", execId: "x3", deploymentId: "dep_mine", command: ["cat"], tty: false });
  await expect.poll(() => dialled.length).toBe(1);
  const [e] = dialled;
  const chunk = Buffer.alloc(64 * 1024 + 1, 0x80);
  chunk[0] = 0;
  for (let i = 0; i < 512; i++) e!.ws.send(chunk);
  e!.ws.send(JSON.stringify({ type: "stdin_end" }));
  await new Promise((r) => setTimeout(r, 500));
  // The rest of the 32 MiB waits at the control plane, not in the agent's memory.
  expect(e!.ws.bufferedAmount).toBeGreaterThan(16 * 1024 * 1024);
  started();
  await opening;
  expect(await closed(e!.ws)).toBe(1000);
  const echoed = e!.messages.filter((m) => m.isBinary).reduce((n, m) => n + m.data.length - 1, 0);
  expect(echoed).toBe(512 * 64 * 1024);
  expect(texts(e!)).toEqual([{ type: "exit", code: 0 }]);
});

it("applies a resize before anything the client sent after it reaches the command", async () => {
  await runContainer("dep_mine");
  // The engine takes a while to resize the terminal; what happened, in order.
  const seen: string[] = [];
  const exec = runtime.exec.bind(runtime);
  runtime.exec = async (id, options) => {
    const proc = await exec(id, options);
    const write = proc.write.bind(proc);
    return Object.assign(proc, {
      resize: async (cols: number, rows: number) => {
        await new Promise((r) => setTimeout(r, 200));
        seen.push(`resize ${cols}x${rows}`);
      },
      write: (chunk: Buffer) => {
        seen.push(`stdin ${chunk.toString()}`);
        return write(chunk);
      },
    });
  };
  const opening = opener.openExec({ type: "open_exec", execId: "x4", deploymentId: "dep_mine", command: ["cat"], tty: true, cols: 80, rows: 24 });
  await expect.poll(() => runtime.execs.length).toBe(1);
  const [e] = dialled;
  e!.ws.send(JSON.stringify({ type: "resize", cols: 120, rows: 40 }));
  e!.ws.send(Buffer.from([0, ...Buffer.from("stty size")]));
  e!.ws.send(JSON.stringify({ type: "resize", cols: 100, rows: 30 }));
  e!.ws.send(Buffer.from([0, ...Buffer.from("again")]));
  e!.ws.send(JSON.stringify({ type: "stdin_end" }));
  await opening;
  expect(await closed(e!.ws)).toBe(1000);
  expect(seen).toEqual(["resize 120x40", "stdin stty size", "resize 100x30", "stdin again"]);
});

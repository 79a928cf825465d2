import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { createClient, ExecError, MemorySessionStore, type WebSocketConstructor } from "../src";

// The SDK's side of exec against a plain WebSocket server on port 0 that plays
// the control plane: it sends a lot of output and watches how fast the client
// takes it. (The whole path, control plane and agent and Docker, is tested by
// cm exec in apps/cli/test/exec.test.ts.)

const MIB = 1024 * 1024;
// ws's WebSocket is the SDK's WebSocketConstructor as it is, no cast (the README's example compiles):
// typechecking this file checks that.
const WS: WebSocketConstructor = WebSocket;
let server: http.Server;
let wss: WebSocketServer;
let sockets: WebSocket[];
let baseUrl = "";

beforeEach(async () => {
  sockets = [];
  wss = new WebSocketServer({ noServer: true, handleProtocols: (protocols) => [...protocols][0] ?? false });
  server = http.createServer((_, res) => res.writeHead(426).end());
  server.on("upgrade", (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => sockets.push(ws)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterEach(async () => {
  for (const ws of sockets) ws.terminate();
  wss.close();
  await new Promise((resolve) => server.close(resolve));
});

const client = () =>
  createClient({ baseUrl, store: new MemorySessionStore({ accessToken: "access", refreshToken: "refresh", expiresAt: Date.now() + 3_600_000 }) });

/** As the control plane relays a command writing `mib` MiB of output: stdout frames, then its exit code. */
async function serveOutput(mib: number, exitCode = 0) {
  await expect.poll(() => sockets.length).toBe(1);
  const ws = sockets[0]!;
  const frame = Buffer.alloc(64 * 1024 + 1, 0x61);
  frame[0] = 1; // stdout
  for (let i = 0; i < mib * 16; i++) ws.send(frame);
  ws.send(JSON.stringify({ type: "exit", code: exitCode }));
  ws.close(1000);
  return ws;
}

it("ignores what a handler returns that is not a promise (stream.write's boolean), and delivers everything", async () => {
  let received = 0;
  const session = client().deployments.exec("dep_1", {
    command: ["cat"],
    onStdout: (bytes) => {
      received += bytes.length;
      return true;
    },
    WebSocket: WS,
  });
  await serveOutput(4, 7);
  expect(await session.exit).toBe(7);
  expect(received).toBe(4 * MIB);
});

it("stops reading the connection while a handler's promise is pending, so the sender is held back; then takes the rest", async () => {
  let received = 0;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const session = client().deployments.exec("dep_1", {
    command: ["cat"],
    onStdout: (bytes) => {
      received += bytes.length;
      return held;
    },
    WebSocket: WS,
  });
  const ws = await serveOutput(64);
  await new Promise((resolve) => setTimeout(resolve, 500));
  // Not taken: it waits at the sender (in its queue and the sockets' buffers), not in the client.
  expect(received).toBeLessThan(32 * MIB);
  expect(ws.bufferedAmount).toBeGreaterThan(16 * MIB);
  release();
  expect(await session.exit).toBe(0);
  expect(received).toBe(64 * MIB);
});

it("closes at once when the caller closes while its handler holds the output", async () => {
  const session = client().deployments.exec("dep_1", {
    command: ["cat"],
    onStdout: () => new Promise<void>(() => undefined), // never ready again
    WebSocket: WS,
  });
  await expect.poll(() => sockets.length).toBe(1);
  const ws = sockets[0]!;
  ws.on("close", () => undefined);
  const frame = Buffer.alloc(64 * 1024 + 1, 0x61);
  frame[0] = 1;
  for (let i = 0; i < 256; i++) ws.send(frame);
  await new Promise((resolve) => setTimeout(resolve, 200));
  const started = Date.now();
  session.close();
  await expect(session.exit).rejects.toBeInstanceOf(ExecError);
  expect(Date.now() - started).toBeLessThan(5_000); // ws would otherwise wait 30 s for the close it cannot read
});

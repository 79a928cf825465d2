// The agent's half of `cm exec` against the real Docker engine: what a command
// that does not read its stdin does to the agent while a tenant pipes data in,
// and what becomes of a command without a tty when its client leaves.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { EXEC_CHANNEL } from "@cm/protocol";
import { needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { ExecOpener } from "../../src/exec/exec-opener";
import { silentLogger } from "../../src/logger";
import { ownRunningContainer } from "../../src/reconcile/own-container";
import { DockerRuntime } from "../../src/runtime/docker-runtime";
import { ensureBusyboxImage } from "../support/busybox-image";
import { dockerTestRun } from "../support/docker-test-run";

const run = dockerTestRun();
const runtime = new DockerRuntime({ docker: run.docker });
let server: http.Server;
let wss: WebSocketServer;
let opener: ExecOpener;
let deploymentId = "";
let containerId = "";
const dialled: WebSocket[] = [];

needs("docker", "busybox").describe("exec in a real container", () => {
  beforeAll(async () => {
    deploymentId = run.deploymentId("exec");
    const id = await runtime.createContainer({
      deploymentId,
      nodeId: "node-test",
      userId: "user-exec",
      image: ensureBusyboxImage(),
      env: {},
      cmd: ["sleep", "3600"],
      exposedPorts: [],
      cpuCores: 0.5,
      memoryMb: 64,
      gpuDeviceIds: [],
      labels: run.labels,
    });
    await runtime.start(id);
    containerId = id;
    wss = new WebSocketServer({ noServer: true });
    server = http.createServer();
    server.on("upgrade", (req, socket, head) => wss.handleUpgrade(req, socket, head, (ws) => dialled.push(ws)));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    opener = new ExecOpener({
      httpUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      token: "agent-token",
      runtime,
      runningContainer: (id) => ownRunningContainer(runtime, { labels: run.labels, nodeId: "node-test" }, id),
      logger: silentLogger,
    });
  }, 60_000);
  afterAll(async () => {
    await opener?.closeAll();
    wss?.close();
    await new Promise((r) => server?.close(r));
    await run.cleanup();
  }, 60_000);

  it("reads no more of the tenant's stdin than the command takes: the rest waits at the control plane, then all of it arrives", async () => {
    // The command reads nothing for 3 s, then counts what it was sent.
    const opening = opener.openExec({ type: "open_exec", execId: "x1", deploymentId, command: ["sh", "-c", "sleep 3; wc -c"], tty: false });
    await expect.poll(() => dialled.length).toBe(1);
    const ws = dialled[0]!;
    const closed = new Promise<number>((r) => ws.once("close", r));
    const out: Buffer[] = [];
    const texts: unknown[] = [];
    ws.on("message", (data: Buffer, isBinary) => (isBinary ? out.push(data.subarray(1)) : texts.push(JSON.parse(String(data)))));
    const chunk = Buffer.alloc(64 * 1024 + 1, 0xff);
    chunk[0] = EXEC_CHANNEL.stdin;
    const chunks = 512; // 32 MiB
    for (let i = 0; i < chunks; i++) ws.send(chunk);
    ws.send(JSON.stringify({ type: "stdin_end" }));
    await new Promise((r) => setTimeout(r, 1_500));
    // An agent that took it all would hold it in memory (a tenant could pipe gigabytes into `sleep`).
    expect(ws.bufferedAmount).toBeGreaterThan(16 * 1024 * 1024);
    await opening;
    expect(await closed).toBe(1000);
    expect(texts).toEqual([{ type: "exit", code: 0 }]);
    expect(Buffer.concat(out).toString().trim()).toBe(String(chunks * 64 * 1024));
  }, 30_000);

  // The processes of the container whose command line contains `marker`, as the host sees them.
  const processes = async (marker: string) =>
    (await runProgram("docker", ["top", containerId, "-eo", "pid,args"])).split("\n").filter((line) => line.includes(marker));

  it.each([
    ["a command that ends on the hang-up", "sleep 301", ["sleep", "301"]],
    ["a shell and its child that ignore it, killed after the grace period", "sleep 302", ["sh", "-c", "trap '' HUP; sleep 302; echo never"]],
  ])(
    "without a tty, a command whose client left does not outlive it: %s",
    async (_, marker, command) => {
      const before = dialled.length;
      const opening = opener.openExec({ type: "open_exec", execId: `x-${marker}`, deploymentId, command, tty: false });
      await expect.poll(() => dialled.length).toBe(before + 1);
      await expect.poll(async () => (await processes(marker)).length, { timeout: 10_000 }).toBeGreaterThan(0);
      dialled.at(-1)!.terminate(); // the client (and with it the control plane's side) went away
      await opening;
      await expect.poll(() => processes(marker), { timeout: 10_000, interval: 200 }).toEqual([]);
    },
    30_000,
  );

  it("an agent shutting down hangs up its sessions and has killed what ignored that by the time it stops", async () => {
    const before = dialled.length;
    const marker = "sleep 303";
    void opener.openExec({ type: "open_exec", execId: "x-shutdown", deploymentId, command: ["sh", "-c", "trap '' HUP; sleep 303; echo never"], tty: false });
    await expect.poll(() => dialled.length).toBe(before + 1);
    await expect.poll(async () => (await processes(marker)).length, { timeout: 10_000 }).toBeGreaterThan(0);
    await opener.closeAll();
    // The agent process may exit now: nothing is left to do later (a SIGKILL due in 2 s would never be sent).
    await expect.poll(() => processes(marker), { timeout: 1_000, interval: 100 }).toEqual([]);
  }, 30_000);
});

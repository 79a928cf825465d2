// DockerEngineEvents through dockerode's own HTTP client, against a stand-in for
// dockerd on a Unix socket: restarting this machine's real dockerd would take
// everyone else's containers down with it. The stand-in answers GET /events as
// dockerd does (200, then a stream held open) and can stop and start again.
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { afterEach, beforeEach, expect, it } from "vitest";
import { systemClock } from "../../src/clock";
import { type ContainerEnd, DockerEngineEvents } from "../../src/runtime/docker-engine-events";
import { silentLogger } from "../../src/runtime/logger";
import { eventually } from "../support/eventually";

class StandInEngine {
  private server: http.Server | undefined;
  private readonly connections = new Set<Socket>();
  /** the query of each GET /events, decoded */
  readonly eventRequests: string[] = [];
  private readonly streams = new Set<http.ServerResponse>();

  constructor(readonly socketPath: string) {}

  get openConnections(): number {
    return this.connections.size;
  }

  async start(): Promise<void> {
    const server = http.createServer((req, res) => {
      if (!req.url?.startsWith("/events")) return void res.writeHead(404).end();
      this.eventRequests.push(decodeURIComponent(req.url));
      res.writeHead(200, { "content-type": "application/json" });
      res.flushHeaders();
      this.streams.add(res);
      res.on("close", () => this.streams.delete(res));
    });
    server.on("connection", (socket) => {
      this.connections.add(socket);
      socket.on("close", () => this.connections.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(this.socketPath, resolve));
    this.server = server;
  }

  /** Writes raw text on every open event stream, as dockerd writes its JSON lines. */
  send(text: string): void {
    for (const res of this.streams) res.write(text);
  }

  /** As dockerd stopping: every connection cut, the socket gone. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.connections) socket.destroy();
    if (server) await new Promise((resolve) => server.close(resolve));
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let dir: string;
let engine: StandInEngine;
let unwatch: (() => void) | undefined;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "engine-events-"));
  engine = new StandInEngine(join(dir, "docker.sock"));
  await engine.start();
});

afterEach(async () => {
  unwatch?.();
  unwatch = undefined;
  await engine.stop();
  rmSync(dir, { recursive: true, force: true });
});

function watch(): { comebacks: () => number } {
  const events = new DockerEngineEvents(new Docker({ socketPath: engine.socketPath }), silentLogger, systemClock, 20);
  let comebacks = 0;
  unwatch = events.onEngineBack(() => comebacks++);
  return { comebacks: () => comebacks };
}

it("says nothing while the engine stays up, and tells once when it answers again after it stopped", async () => {
  const watcher = watch();
  await eventually(async () => engine.eventRequests.length === 1, 5_000, "the event stream opened");
  // Only daemon events and containers' ends: the stream stays quiet on a busy engine.
  expect(engine.eventRequests[0]).toContain('filters={"type":["daemon","container"],"event":["die","destroy"]}');
  await pause(100);
  expect(watcher.comebacks()).toBe(0);

  await engine.stop();
  await pause(100); // refused a few times meanwhile
  expect(watcher.comebacks()).toBe(0);
  await engine.start();
  await eventually(async () => watcher.comebacks() === 1, 5_000, "the comeback told");
  await pause(100);
  expect(watcher.comebacks()).toBe(1);
  expect(engine.openConnections).toBe(1);
});

it("lets go of the engine once nobody listens", async () => {
  const watcher = watch();
  await eventually(async () => engine.openConnections === 1, 5_000, "the event stream opened");
  unwatch?.();
  unwatch = undefined;
  await eventually(async () => engine.openConnections === 0, 5_000, "the stream closed");
  await engine.stop();
  await engine.start();
  await pause(100);
  expect(engine.eventRequests).toHaveLength(1);
  expect(watcher.comebacks()).toBe(0);
});

it("tells containers' ends with their labels, however the lines are cut, and nothing else", async () => {
  const events = new DockerEngineEvents(new Docker({ socketPath: engine.socketPath }), silentLogger, systemClock, 20);
  const ends: ContainerEnd[] = [];
  unwatch = events.onContainerEnd((end) => ends.push(end));
  await eventually(async () => engine.openConnections === 1, 5_000, "the event stream opened");
  const die = JSON.stringify({ Type: "container", Action: "die", Actor: { ID: "c1", Attributes: { "cm.sandbox-name": "cm-sbx-1", exitCode: "137" } } });
  const destroy = JSON.stringify({ Type: "container", Action: "destroy", Actor: { ID: "c2", Attributes: { "cm.sandbox": "true" } } });
  const reload = JSON.stringify({ Type: "daemon", Action: "reload", Actor: { ID: "d", Attributes: {} } });
  engine.send(`${reload}\n${die.slice(0, 20)}`);
  await pause(50);
  engine.send(`${die.slice(20)}\nnot json\n${destroy}\n`);
  await eventually(async () => ends.length === 2, 5_000, "two ends told");
  expect(ends).toEqual([
    { id: "c1", action: "die", labels: { "cm.sandbox-name": "cm-sbx-1", exitCode: "137" } },
    { id: "c2", action: "destroy", labels: { "cm.sandbox": "true" } },
  ]);
});

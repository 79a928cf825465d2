// The probes decide what a newcomer's run skips: nothing there is a skip, a
// piece that answers badly is not (its tests run and fail).

import { mkdtempSync, rmSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo, Server, Socket } from "node:net";
import { createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { probePieces } from "../src/pieces";
import { skipSummaryLines } from "../src/skip-summary";

const dir = mkdtempSync(join(tmpdir(), "cm-pieces-"));
const servers: Server[] = [];
const sockets = new Set<Socket>();
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const listening = (server: Server, at: string | number) =>
  new Promise<Server>((resolve) => {
    servers.push(server);
    server.on("connection", (socket: Socket) => sockets.add(socket));
    if (typeof at === "string") server.listen(at, () => resolve(server));
    else server.listen(at, "127.0.0.1", () => resolve(server));
  });

/** A port on which nothing listens: one a server had and gave back. */
async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("probePieces", () => {
  it("calls Docker and PostgreSQL missing when nothing answers, and says where it looked", async () => {
    const port = await closedPort();
    const missing = await probePieces({ ...process.env, DOCKER_HOST: `unix://${dir}/none.sock`, TEST_POSTGRES_URL: `postgres://u:secret@127.0.0.1:${port}/x` });
    expect(missing.docker).toBe(`no Docker engine answered at unix://${dir}/none.sock (ENOENT)`);
    expect(missing.postgres).toBe(`no PostgreSQL answered at postgres://u:***@127.0.0.1:${port}/x (ECONNREFUSED; set TEST_POSTGRES_URL)`);
  });

  it("calls a TCP Docker host where nothing listens missing", async () => {
    const port = await closedPort();
    expect((await probePieces({ ...process.env, DOCKER_HOST: `tcp://127.0.0.1:${port}` })).docker).toBe(
      `no Docker engine answered at tcp://127.0.0.1:${port} (ECONNREFUSED)`,
    );
  });

  it("counts an engine or a database that answers badly as present, so their tests run and fail", async () => {
    const socket = join(dir, "sick-docker.sock");
    await listening(
      createHttpServer((_req, res) => res.writeHead(500).end("engine is sick")),
      socket,
    );
    const garbage = await listening(
      createTcpServer((conn) => conn.end("this is not PostgreSQL\n")),
      0,
    );
    const missing = await probePieces({
      ...process.env,
      DOCKER_HOST: `unix://${socket}`,
      TEST_POSTGRES_URL: `postgres://u:p@127.0.0.1:${(garbage.address() as AddressInfo).port}/x`,
    });
    expect(missing.docker).toBeUndefined();
    expect(missing.postgres).toBeUndefined();
  });

  it("finds a tool on PATH, and says how to install one that is not", async () => {
    const empty = mkdtempSync(join(dir, "path-"));
    const missing = await probePieces({ ...process.env, PATH: empty, DOCKER_HOST: `unix://${dir}/none.sock` });
    // openssl lives in /usr/bin, which this PATH leaves out; /usr/sbin and /sbin are always looked in.
    expect(missing.openssl).toBe("openssl is not installed (apt-get install openssl)");
  });
});

describe("skipSummaryLines", () => {
  it("counts each skipped test under every piece it lacked, most first, and says how to run them all", () => {
    const docker = "no Docker engine answered at unix:///var/run/docker.sock (ENOENT)";
    const busybox = "/bin/busybox is not installed (apt-get install busybox-static)";
    const pg = "no PostgreSQL answered at postgres://u:***@127.0.0.1:9/x (ECONNREFUSED; set TEST_POSTGRES_URL)";
    const lines = skipSummaryLines([[docker, busybox], [docker, busybox], [pg], [docker], [], []]);
    expect(lines).toEqual([
      "4 tests skipped for want of what this machine lacks:",
      `  3  ${docker}`,
      `  2  ${busybox}`,
      `  1  ${pg}`,
      expect.stringContaining("`bash .ci/run`"),
    ]);
  });

  it("says nothing when no test was skipped for a missing piece", () => {
    expect(skipSummaryLines([[], []])).toEqual([]);
    expect(skipSummaryLines([])).toEqual([]);
  });
});

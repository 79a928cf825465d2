// What one log read or one log stream may hold: a read answers at most
// LOG_READ_MAX_BYTES of text, a stream sends its tail a page at a time as its
// client reads, and a client that reads nothing has its connection closed.
// How much memory that saves is bench/log-reads.ts's question.
import net from "node:net";
import { LOG_READ_MAX_BYTES } from "@cm/protocol";
import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";
import { openSse, type SseEvent, until } from "./support/sse-client";

const LINE_BYTES = 16 * 1024;
/** Line n: its number, then x up to 16 KiB: the longest line the store keeps. */
const bigLine = (n: number) => String(n).padEnd(LINE_BYTES, "x");
const numberOf = (e: SseEvent) => Number.parseInt(JSON.parse(e.data!).message, 10);

describe("log reads and streams bounded by bytes", () => {
  let h: Harness;
  let tenant: Awaited<ReturnType<Harness["signIn"]>>;
  let nodeId: string;
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase, { config: { LOG_STREAM_STALL_MS: 1_000 } });
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    nodeId = (await h.onlineNode((await h.signIn()).token)).id;
  });
  afterAll(() => h.close());

  /** A deployment whose log holds `count` lines of 16 KiB, numbered from 1. */
  async function deploymentWithLines(count: number) {
    const id = (await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox:1.36" } })).json.deployment.id as string;
    const ts = new Date().toISOString();
    for (let from = 1; from <= count; from += 100) {
      const lines = Array.from({ length: Math.min(100, count - from + 1) }, (_, i) => ({
        seq: from + i,
        ts,
        tsMs: Date.parse(ts),
        stream: "stdout" as const,
        message: bigLine(from + i),
      }));
      await h.deps.repos.logIngest.append(id, lines);
    }
    return id;
  }

  it("GET /logs answers the newest lines that fit 4 MiB and says the older ones were left out", async () => {
    const id = await deploymentWithLines(300);
    const fits = LOG_READ_MAX_BYTES / LINE_BYTES;
    const big = await h.call("GET", `/deployments/${id}/logs?tail=10000`, { token: tenant.token });
    expect(big.status).toBe(200);
    expect(big.json.truncated).toBe(true);
    expect(big.json.logs.map((l: { message: string }) => Number.parseInt(l.message, 10))).toEqual(Array.from({ length: fits }, (_, i) => 300 - fits + 1 + i));
    expect(big.text.length).toBeLessThan(LOG_READ_MAX_BYTES + 100_000);

    const small = await h.call("GET", `/deployments/${id}/logs?tail=10`, { token: tenant.token });
    expect(small.json.truncated).toBe(false);
    expect(small.json.logs).toHaveLength(10);
    expect(small.json.logs[9].message).toBe(bigLine(300));
  });

  it("streams a tail of any size to a client that reads, every line once and in order", async () => {
    const id = await deploymentWithLines(600);
    const s = await openSse(`${h.url}/deployments/${id}/logs/stream?tail=10000`, tenant.token);
    await until("the whole tail", () => s.events.length >= 600, 30_000);
    expect(s.events.map(numberOf)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1));
    expect(s.events.at(-1)!.id).toBe("600");
    s.close();
  });

  it("closes the connection of a client that reads nothing; it resumes after the last line it got", async () => {
    // 16 MB: more than the sockets' buffers on both ends take.
    const id = await deploymentWithLines(1_000);
    const socket = net.connect(Number(new URL(h.url).port), "127.0.0.1");
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(
      `GET /deployments/${id}/logs/stream?tail=10000 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${tenant.token}\r\nAccept: text/event-stream\r\n\r\n`,
    );
    socket.pause();
    // Long past the stall limit (1 s here) once the buffers are full.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    let received = "";
    let closed = false;
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      closed = true;
    });
    socket.resume();
    await until("the server to have closed the connection", () => closed, 15_000);
    const ids = [...received.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.length).toBeLessThan(1_000);
    expect(received).not.toMatch(/^event: end$/m);

    // What it missed comes after the last id it read, none lost or repeated.
    const last = ids.at(-1)!;
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1));
    const again = await openSse(`${h.url}/deployments/${id}/logs/stream`, tenant.token, { "last-event-id": String(last) });
    await until("the rest", () => again.events.length >= 1_000 - last, 30_000);
    expect(again.events.map(numberOf)).toEqual(Array.from({ length: 1_000 - last }, (_, i) => last + 1 + i));
    again.close();
  }, 60_000);
});

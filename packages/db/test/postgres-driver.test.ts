// The PostgreSQL driver survives its connection closing under a query: postgres.js
// 3.4.x throws from a setImmediate when a small write finds its socket gone (an
// uncaught TypeError that ended the control plane in a database-outage fault
// test); scripts/patch-postgres.mjs mends it after every install.
import { readFileSync } from "node:fs";
import net from "node:net";
import { needs } from "@cm/testkit";
import postgres from "postgres";
import { expect } from "vitest";
// @ts-expect-error a plain .mjs script, no types
import { connectionFiles, MARK } from "../../../scripts/patch-postgres.mjs";

const pg = needs("postgres");

pg.describe("the PostgreSQL driver when its connection closes", () => {
  pg.it("is the mended build: every build of connection.js has the guard (npm install runs the mend)", async () => {
    const files: string[] = connectionFiles();
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) expect(readFileSync(file, "utf8"), file).toContain(MARK);
  });

  pg.it("answers CONNECTION_CLOSED to a query on a connection the database closed, and the process goes on", async () => {
    // A relay between the driver and PostgreSQL, so the test can close the connection cleanly, as a restarting server does.
    const target = new URL(process.env.TEST_POSTGRES_URL ?? "postgres://postgres:postgres@127.0.0.1:5432/postgres");
    const relayed = new Set<net.Socket>();
    const relay = net.createServer((client) => {
      const server = net.connect(Number(target.port || 5432), target.hostname);
      relayed.add(client);
      client.pipe(server).pipe(client);
      client.on("error", () => server.destroy());
      server.on("error", () => client.destroy());
      client.on("close", () => server.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, "127.0.0.1", r));
    const url = new URL(target);
    url.port = String((relay.address() as net.AddressInfo).port);
    const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
    try {
      // A reserved connection is never rotated away: the next query goes to this very connection.
      const reserved = await sql.reserve();
      expect(await reserved`select 1 as one`).toEqual([{ one: 1 }]);
      const closed = new Promise<void>((r) => [...relayed][0]!.once("close", () => r()));
      for (const s of relayed) s.end();
      await closed;
      await new Promise((r) => setTimeout(r, 50));
      // Unmended, the query waits forever (or the process dies): give it 5 s.
      const hung = new Promise((_, reject) => setTimeout(() => reject(new Error("no answer within 5 s")), 5_000).unref());
      await expect(Promise.race([reserved`select 2 as two`, hung])).rejects.toMatchObject({ code: "CONNECTION_CLOSED" });
      reserved.release();
    } finally {
      await sql.end({ timeout: 1 });
      await new Promise((r) => relay.close(r));
    }
  });
});

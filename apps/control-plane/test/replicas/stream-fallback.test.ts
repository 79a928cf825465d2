import { fileURLToPath } from "node:url";
import { describeEachDatabase } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openSse, until } from "../api/support/sse-client";
import { type Harness, startHarness } from "../support/harness";

// The streams' fallback read (issue 41): lines another replica stored reach this
// replica's followers with no wake-up, and finding them costs one query a period
// for all the deployments this replica's streams watch, not one per deployment.

const FALLBACK_MS = 300;
const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
/** Another process storing one log line, as another replica's ingest does, and sending no notice. */
const WRITER = `
import postgres from "postgres";
const [url, id, seq, ts, message] = process.argv.slice(1);
const sql = postgres(url, { max: 1, onnotice: () => undefined });
await sql\`insert into deployment_logs (deployment_id, seq, ts, ts_ms, stream, message) values (\${id}, \${Number(seq)}, \${ts}, \${Date.parse(ts)}, 'stdout', \${message})\`;
await sql.end();
`;
const DEPLOYMENTS = 6;

describeEachDatabase("the streams' fallback read on $name", (db) => {
  let h: Harness;
  let tenant: Awaited<ReturnType<Harness["signIn"]>>;
  let nodeId: string;
  let seq = 0;
  beforeAll(async () => {
    h = await startHarness(db, { config: { STREAM_FALLBACK_MS: FALLBACK_MS } });
    tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
    nodeId = (await h.onlineNode((await h.signIn()).token, { maxDeployments: DEPLOYMENTS, cpuCores: 64, ramMb: 256_000 })).id;
  });
  afterAll(() => h?.close());

  // Stored straight into the database, as another replica would: no notice here. On
  // PostgreSQL by another process on a connection of its own; the embedded database
  // is one process's (a second is refused), so there by this process's store.
  const storeElsewhere = async (id: string, message: string) => {
    const ts = new Date().toISOString();
    if (db.name === "sqlite") return h.deps.repos.logIngest.append(id, [{ seq: ++seq, ts, tsMs: Date.parse(ts), stream: "stdout" as const, message }]);
    await runProgram(process.execPath, ["--input-type=module", "-e", WRITER, h.deps.config.DATABASE_URL, id, String(++seq), ts, message], { cwd: ROOT });
  };
  const messages = (events: Array<{ event?: string; data?: string }>) => events.filter((e) => e.data && !e.event).map((e) => JSON.parse(e.data!).message);

  it("reads once a period for every followed deployment, and brings each follower its line within the period", async () => {
    const ids: string[] = [];
    for (let i = 0; i < DEPLOYMENTS; i++) {
      const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox:1.36" } });
      expect(r.status).toBe(201);
      ids.push(r.json.deployment.id);
    }
    const streams = await Promise.all(ids.map((id) => openSse(`${h.url}/deployments/${id}/logs/stream`, tenant.token)));
    for (const s of streams) expect(s.res.status).toBe(200);

    // What the streams ask of the store from here on, by kind.
    const repos = h.deps.repos;
    const asked = { watched: 0, rowReads: 0, lineReads: new Map<string, number>() };
    const { watched, get } = repos.deployments;
    const { after } = repos.logs;
    repos.deployments.watched = (...a) => {
      asked.watched++;
      return watched(...a);
    };
    repos.deployments.get = (...a) => {
      asked.rowReads++;
      return get(...a);
    };
    repos.logs.after = (id, ...a) => {
      asked.lineReads.set(id, (asked.lineReads.get(id) ?? 0) + 1);
      return after(id, ...a);
    };
    try {
      // Let the first period (which wakes every follower once) pass, then watch quiet ones.
      await new Promise((r) => setTimeout(r, 2 * FALLBACK_MS));
      asked.watched = 0;
      asked.rowReads = 0;
      asked.lineReads.clear();
      const quietStart = Date.now();
      await new Promise((r) => setTimeout(r, 5 * FALLBACK_MS));
      const periods = (Date.now() - quietStart) / FALLBACK_MS;
      expect(asked.watched).toBeGreaterThanOrEqual(Math.floor(periods) - 1);
      expect(asked.watched).toBeLessThanOrEqual(Math.ceil(periods));
      expect(asked.rowReads).toBe(0);
      expect(asked.lineReads.size).toBe(0);

      // A line on half of them, stored elsewhere: each reaches its follower within about a period.
      const lined = ids.filter((_, i) => i % 2 === 0);
      await Promise.all(lined.map((id) => storeElsewhere(id, `elsewhere ${id}`)));
      const storedAt = Date.now();
      const arrivedMs: number[] = [];
      await Promise.all(
        lined.map(async (id) => {
          const s = streams[ids.indexOf(id)]!;
          await until(`the line of ${id}`, () => messages(s.events).includes(`elsewhere ${id}`), 10 * FALLBACK_MS);
          arrivedMs.push(Date.now() - storedAt);
        }),
      );
      // From the last commit: one period at most, and what a loaded machine adds to a read and a write.
      expect(Math.max(...arrivedMs)).toBeLessThan(FALLBACK_MS + 700);
      // Only the followers of those deployments read lines; the others were not woken.
      expect([...asked.lineReads.keys()].sort()).toEqual([...lined].sort());
      for (const s of streams) expect(messages(s.events).length).toBe(streams.indexOf(s) % 2 === 0 ? 1 : 0);
      expect(asked.rowReads).toBe(0);
    } finally {
      repos.deployments.watched = watched;
      repos.deployments.get = get;
      repos.logs.after = after;
      for (const s of streams) s.close();
    }
  });
});

/**
 * Question: what do the streams' fallback reads (STREAM_FALLBACK_MS, for lines
 * and changes another replica stored) cost the database when one replica's
 * streams follow many deployments? Now: one query a period for all of them
 * (services/deployment-watch.ts). Baseline, same run and same store: what each
 * period cost before, a row read and a line read per followed deployment (the
 * old watch's per-deployment timer woke all of a deployment's followers, who
 * shared one line read, and re-read its row), timed back to back.
 *
 * In this process: the real control plane (startHarness) on each database,
 * DEPLOYMENTS deployments with LINES lines each stored, two followers each
 * registered with the watch (a row listener and a line listener: what a logs
 * stream holds). Each period a tenth of the deployments get a line stored
 * straight into the database, as another replica would (no notice).
 *
 *   npx tsx bench/stream-fallback.ts      (DEPLOYMENTS=500 LINES=200 PERIODS=10)
 */
import { postgresDatabase, sqliteDatabase, type TestDatabase } from "@cm/db/testing";
import { startHarness } from "../apps/control-plane/test/support/harness";

const DEPLOYMENTS = Number(process.env.DEPLOYMENTS ?? 500);
const LINES = Number(process.env.LINES ?? 200);
const PERIODS = Number(process.env.PERIODS ?? 10);
const FALLBACK_MS = 1_000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function run(db: TestDatabase) {
  const h = await startHarness(db, { config: { STREAM_FALLBACK_MS: FALLBACK_MS } });
  try {
    const tenant = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000_000);
    const operator = (await h.signIn()).token;
    const ids: string[] = [];
    let nodeId = "";
    for (let i = 0; i < DEPLOYMENTS; i++) {
      // A node holds 256 deployments at most.
      if (i % 250 === 0) nodeId = (await h.onlineNode(operator, { maxDeployments: 250, cpuCores: 4096, ramMb: 100_000_000, diskGb: 1_000_000 })).id;
      const r = await h.call("POST", "/deployments", { token: tenant.token, body: { nodeId, customImage: "busybox:1.36" } });
      if (r.status !== 201) throw new Error(`create: ${r.status} ${r.text}`);
      ids.push(r.json.deployment.id);
    }
    const seqs = new Map(ids.map((id) => [id, 0]));
    const store = (id: string, n: number) => {
      const ts = new Date().toISOString();
      const from = seqs.get(id)!;
      seqs.set(id, from + n);
      return h.deps.repos.logIngest.append(
        id,
        Array.from({ length: n }, (_, i) => ({ seq: from + i + 1, ts, tsMs: Date.parse(ts), stream: "stdout" as const, message: `line ${from + i + 1}` })),
      );
    };
    for (const id of ids) await store(id, LINES);

    // What the fallback asks of the store, timed.
    const repos = h.deps.repos;
    const watchedMs: number[] = [];
    let watchedCalls = 0;
    let lineReads = 0;
    let rowReads = 0;
    const { watched } = repos.deployments;
    const { after } = repos.logs;
    const { get } = repos.deployments;
    repos.deployments.watched = async (...a) => {
      watchedCalls++;
      const t0 = performance.now();
      try {
        return await watched(...a);
      } finally {
        watchedMs.push(performance.now() - t0);
      }
    };
    repos.logs.after = (...a) => {
      lineReads++;
      return after(...a);
    };
    repos.deployments.get = (...a) => {
      rowReads++;
      return get(...a);
    };
    // Two followers a deployment, reading from where they are, as a logs stream does.
    const cursors = new Map(ids.map((id) => [id, LINES]));
    const stops = ids.flatMap((id) => [
      h.deps.watch.onRow(id, () => undefined),
      h.deps.watch.onLines(id, () => {
        void h.deps.watch.readLines(id, cursors.get(id)!, 1000).then((rows) => {
          if (rows.length > 0) cursors.set(id, rows.at(-1)!.seq);
        });
      }),
    ]);
    await new Promise((r) => setTimeout(r, 2.5 * FALLBACK_MS)); // the first read wakes everyone once
    watchedCalls = 0;
    lineReads = 0;
    rowReads = 0;
    watchedMs.length = 0;
    const t0 = performance.now();
    for (let p = 0; p < PERIODS; p++) {
      for (let i = 0; i < DEPLOYMENTS / 10; i++) await store(ids[(p * 7 + i * 10) % DEPLOYMENTS]!, 1);
      await new Promise((r) => setTimeout(r, FALLBACK_MS));
    }
    const periods = (performance.now() - t0) / FALLBACK_MS;
    for (const stop of stops) stop();
    repos.deployments.watched = watched;
    repos.logs.after = after;
    repos.deployments.get = get;

    // The baseline: one period as the old watch read it, a row and a line read per deployment, timed.
    const oldMs: number[] = [];
    for (let p = 0; p < 3; p++) {
      const s = performance.now();
      await Promise.all(ids.map(async (id) => Promise.all([get(id), after(id, cursors.get(id)!, 1000)])));
      oldMs.push(performance.now() - s);
    }
    const caughtUp = ids.every((id) => cursors.get(id) === seqs.get(id));
    return {
      db: db.name,
      periods: periods.toFixed(1),
      fallbackQueriesPerPeriod: (watchedCalls / periods).toFixed(2),
      fallbackReadMedianMs: median(watchedMs).toFixed(1),
      lineReadsPerPeriod: (lineReads / periods).toFixed(1),
      rowReadsPerPeriod: (rowReads / periods).toFixed(1),
      oldQueriesPerPeriod: 2 * DEPLOYMENTS,
      oldPeriodMedianMs: median(oldMs).toFixed(1),
      everyLineReachedItsFollowers: caughtUp,
    };
  } finally {
    await h.close();
  }
}

const out = [];
for (const db of [sqliteDatabase, postgresDatabase]) out.push(await run(db));
console.log(JSON.stringify({ deployments: DEPLOYMENTS, linesEach: LINES, fallbackMs: FALLBACK_MS, results: out }, null, 2));

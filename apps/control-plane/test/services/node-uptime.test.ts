// A page's uptime percents: the hours that no longer change summed once per clock hour, the live ones each read.
import { openRepos, type Repos, uptimePercents } from "@cm/db";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { createNodeUptimes } from "../../src/services/node-uptime";

const HOUR = 3_600_000;
/** Beats an hour apart, each counting 50 minutes: percents far from 0 in every window. */
const CAP_MS = 50 * 60_000;
const H = 500_000;

describeEachDatabase("node uptimes on $name", (db) => {
  let repos: Repos;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const made = await db.create();
    drop = made.drop;
    repos = await openRepos(made.url);
  });
  afterAll(async () => {
    await repos.handle.close();
    await drop();
  });

  it("answers what summing every hour answers, as beats come, reading the settled hours once per clock hour", async () => {
    const ids = ["node_u1", "node_u2", "node_never"];
    for (const id of ids) {
      await repos.nodes.create({
        id,
        operatorId: "usr_op",
        name: id,
        region: "eu-west",
        country: "DE",
        hourlyRateCents: 1,
        maxDeployments: 1,
        agentTokenHash: `h-${id}`,
        createdAt: (H - 100) * HOUR,
      });
      if (id !== "node_never") await repos.nodes.markOnline(id, (H - 50) * HOUR);
    }
    const beat = (id: string, ms: number) => repos.nodes.recordHeartbeats([[id, ms]], CAP_MS);
    for (let hour = H - 49; hour <= H; hour++) await beat("node_u1", hour * HOUR + 20_000);
    await beat("node_u2", (H - 1) * HOUR + 10_000);
    const rows = async () => Promise.all(ids.map(async (id) => (await repos.nodes.get(id))!));
    const everyHour = async (nowMs: number) => {
      const heard = await repos.nodes.uptime(ids, nowMs);
      return (await rows()).map((n) => uptimePercents(n.createdAt, heard.get(n.id), nowMs));
    };
    const uptimes = createNodeUptimes(repos);
    const read = vi.spyOn(repos.nodes, "uptime");
    const viaReader = async (nowMs: number) => {
      const of = await uptimes(await rows(), nowMs);
      return (await rows()).map(of);
    };

    let now = H * HOUR + 40_000;
    expect(await viaReader(now)).toEqual(await everyHour(now));
    const settledReads = () => read.mock.calls.filter(([, , hours]) => hours?.beforeHour !== undefined).length;
    expect(settledReads()).toBe(1);
    // New beats in the live hours show at once; the settled hours are not read again within the hour.
    await beat("node_u1", H * HOUR + 60_000);
    await beat("node_u2", H * HOUR + 20_000);
    now = H * HOUR + 70_000;
    expect(await viaReader(now)).toEqual(await everyHour(now));
    expect(settledReads()).toBe(1);
    // The next clock hour sums them again.
    now = (H + 1) * HOUR + 5_000;
    await beat("node_u1", now);
    expect(await viaReader(now)).toEqual(await everyHour(now));
    expect(settledReads()).toBe(2);
    expect((await viaReader(now))[0]).toMatchObject({ last24h: expect.any(Number), last7d: expect.any(Number) });
    expect((await viaReader(now))[0]!.last24h).toBeGreaterThan(50);
  });
});

// Uptime from heartbeats (issue 28): what one flush adds to node_uptime_hours, and what
// the prune forgets, on each dialect.
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { openRepos, type Repos } from "../src";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const CAP_MS = 30_000;
/** A clock hour well after the nodes' creation. */
const H = 500_000;

describeEachDatabase("node uptime on $name", (db) => {
  let repos: Repos;
  let drop: () => Promise<void>;
  let n = 0;
  beforeAll(async () => {
    const made = await db.create();
    drop = made.drop;
    repos = await openRepos(made.url);
  });
  afterAll(async () => {
    await repos.handle.close();
    await drop();
  });

  async function node(heardAtMs: number) {
    const id = `node_uptime${++n}`;
    await repos.nodes.create({
      id,
      operatorId: "usr_op",
      name: id,
      region: "eu-west",
      country: "DE",
      hourlyRateCents: 1,
      maxDeployments: 1,
      agentTokenHash: `hash-${id}`,
      createdAt: 0,
    });
    await repos.nodes.markOnline(id, heardAtMs);
    return id;
  }
  /** What the windows read at the start of clock hour H + 24: last24h holds hour H on, last7d the hours before it too. */
  const heard = async (id: string) => (await repos.nodes.uptime([id], (H + 24) * HOUR)).get(id);

  it("adds each gap to the clock hours it spans, at most the cap, and a beat already counted never again", async () => {
    const id = await node(H * HOUR - 4_000);
    await repos.nodes.recordHeartbeats([[id, H * HOUR + 6_000]], CAP_MS);
    // 4 s before the hour, 6 s after it.
    expect(await heard(id)).toEqual({ last24h: 6_000, last7d: 10_000, last30d: 10_000 });
    // Five silent minutes count as the cap; the same beat again, or an older one, adds nothing.
    await repos.nodes.recordHeartbeats([[id, H * HOUR + 306_000]], CAP_MS);
    await repos.nodes.recordHeartbeats([[id, H * HOUR + 306_000]], CAP_MS);
    await repos.nodes.recordHeartbeats([[id, H * HOUR + 100_000]], CAP_MS);
    expect(await heard(id)).toEqual({ last24h: 36_000, last7d: 40_000, last30d: 40_000 });
    expect((await repos.nodes.get(id))?.lastHeartbeat).toBe(H * HOUR + 306_000);
  });

  it("counts nothing for a node never heard from, and many nodes in one flush", async () => {
    const a = await node(H * HOUR);
    const b = await node(H * HOUR + 1_000);
    const silent = `node_never${++n}`;
    await repos.nodes.recordHeartbeats(
      [
        [a, H * HOUR + 10_000],
        [b, H * HOUR + 10_000],
        [silent, H * HOUR + 10_000],
      ],
      CAP_MS,
    );
    const got = await repos.nodes.uptime([a, b, silent], (H + 24) * HOUR);
    expect([got.get(a)?.last24h, got.get(b)?.last24h, got.get(silent)]).toEqual([10_000, 9_000, undefined]);
  });

  it("narrows every window to the hours asked for, the two parts summing to the whole", async () => {
    const id = await node(H * HOUR - 4_000);
    for (const hour of [H, H + 22, H + 23]) await repos.nodes.recordHeartbeats([[id, hour * HOUR + 6_000]], CAP_MS);
    // Hour H - 1: 4 s; H: 6 s; then each beat's 30 s cap split 24 s before its hour, 6 s in it: H + 21: 24, H + 22: 30, H + 23: 6.
    const now = (H + 24) * HOUR;
    expect((await repos.nodes.uptime([id], now)).get(id)).toEqual({ last24h: 66_000, last7d: 70_000, last30d: 70_000 });
    expect((await repos.nodes.uptime([id], now, { beforeHour: H + 22 })).get(id)).toEqual({ last24h: 30_000, last7d: 34_000, last30d: 34_000 });
    expect((await repos.nodes.uptime([id], now, { fromHour: H + 22 })).get(id)).toEqual({ last24h: 36_000, last7d: 36_000, last30d: 36_000 });
  });

  it("forgets only the hours older than 31 days", async () => {
    const id = await node(H * HOUR - 4_000);
    await repos.nodes.recordHeartbeats([[id, H * HOUR + 6_000]], CAP_MS);
    // 30 days on, both hours are still in the 30-day window's reach, or within the day kept past it.
    expect(await repos.nodes.pruneUptime(H * HOUR + 30 * DAY + 6_000)).toBe(0);
    expect(await heard(id)).toEqual({ last24h: 6_000, last7d: 10_000, last30d: 10_000 });
    // 31 days on, the hour before H goes (other tests' nodes' too); an hour later, H.
    expect(await repos.nodes.pruneUptime((H + 31 * 24) * HOUR)).toBeGreaterThanOrEqual(1);
    expect(await heard(id)).toEqual({ last24h: 6_000, last7d: 6_000, last30d: 6_000 });
    expect(await repos.nodes.pruneUptime((H + 31 * 24 + 1) * HOUR)).toBeGreaterThanOrEqual(1);
    expect(await repos.nodes.uptime([id], (H + 24) * HOUR)).toEqual(new Map());
  });
});

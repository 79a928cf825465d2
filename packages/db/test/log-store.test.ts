// The per-deployment log store: what it keeps whatever order its batches come
// in, and reads bounded by bytes as well as lines, on each dialect.
import { LOG_LINES_KEPT } from "@cm/protocol";
import { describeEachDatabase } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { NewLogLine } from "../src";
import { openRepos, type Repos } from "../src";

const block = (from: number, n: number, message = (seq: number) => `line ${seq}`): NewLogLine[] =>
  Array.from({ length: n }, (_, i) => ({
    seq: from + i,
    ts: new Date(1_800_000_000_000 + from + i).toISOString(),
    tsMs: 1_800_000_000_000 + from + i,
    stream: "stdout",
    message: message(from + i),
  }));
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

describeEachDatabase("the log store on $name", (db) => {
  let repos: Repos;
  let drop: () => Promise<void>;
  let n = 0;
  const deployment = () => `dep_logstore${++n}`;
  beforeAll(async () => {
    const made = await db.create();
    drop = made.drop;
    repos = await openRepos(made.url);
  });
  afterAll(async () => {
    await repos.handle.close();
    await drop();
  });

  const stored = async (id: string) => (await repos.logs.tail(id, 100_000)).map((r) => r.seq);

  it("keeps the 10,000 highest-numbered lines when batches come numbered downwards", async () => {
    const id = deployment();
    for (const from of [200_001, 100_001, 1]) expect(await repos.logIngest.append(id, block(from, 5_000))).toBe(5_000);
    expect(await stored(id)).toEqual([...range(100_001, 5_000), ...range(200_001, 5_000)]);
  });

  it("keeps at most 10,000 with gaps, repeats and shuffled batches, and the highest of them", async () => {
    const id = deployment();
    const seqs = [...range(1, 4_000), ...range(50_000, 4_000), ...range(9_000, 4_000), ...range(30_000, 2_000)];
    // Shuffled by a fixed permutation, in batches of 1,000, each batch sent twice.
    const order = seqs.map((s, i) => ({ s, k: (i * 7919) % seqs.length })).sort((a, b) => a.k - b.k);
    for (let i = 0; i < order.length; i += 1_000) {
      const batch = order.slice(i, i + 1_000).flatMap((o) => block(o.s, 1));
      await repos.logIngest.append(id, batch);
      await repos.logIngest.append(id, batch);
    }
    const kept = await stored(id);
    expect(kept).toHaveLength(LOG_LINES_KEPT);
    expect(kept).toEqual([...seqs].sort((a, b) => a - b).slice(-LOG_LINES_KEPT));
  });

  it("answers the newest lines that fit the byte cap, says when older ones were left out, and pages a follower by bytes", async () => {
    const id = deployment();
    // 40 lines of 1,000 bytes (é is two).
    await repos.logIngest.append(
      id,
      block(1, 40, (seq) => `${String(seq).padStart(4, "0")} ${"é".repeat(497)}x`),
    );
    const capped = await repos.logs.newest(id, { tail: 30, maxBytes: 10_000 });
    expect(capped.truncated).toBe(true);
    expect(capped.rows.map((r) => r.seq)).toEqual(range(31, 10));
    const all = await repos.logs.newest(id, { tail: 30, maxBytes: 100_000 });
    expect(all).toMatchObject({ truncated: false });
    expect(all.rows.map((r) => r.seq)).toEqual(range(11, 30));
    // A line longer than the cap still goes, alone, so a reader can pass it.
    expect((await repos.logs.newest(id, { tail: 5, maxBytes: 10 })).rows.map((r) => r.seq)).toEqual([40]);

    const pages: number[][] = [];
    for (let after = 0; ; ) {
      const page = await repos.logs.after(id, after, 1_000, undefined, 4_500);
      if (page.length === 0) break;
      pages.push(page.map((r) => r.seq));
      after = page.at(-1)!.seq;
    }
    expect(pages.map((p) => p.length)).toEqual([4, 4, 4, 4, 4, 4, 4, 4, 4, 4]);
    expect(pages.flat()).toEqual(range(1, 40));
    expect(await repos.logs.tailStart(id, 25)).toBe(16);
    expect(await repos.logs.tailStart(id, 100)).toBe(1);
    expect(await repos.logs.tailStart(deployment(), 100)).toBeUndefined();
  });
});

// The catalogue's cache of serialised pages: what a miss under load makes, and what a change throws away.
import { describe, expect, it } from "vitest";
import { ResponseCache } from "../../src/services/response-cache";

const deferred = () => {
  let resolve!: (body: string) => void;
  const promise = new Promise<string>((r) => {
    resolve = r;
  });
  return { promise, resolve };
};

describe("ResponseCache.fill", () => {
  it("makes a missing body once for every caller that asks while it is being made, then serves it until the TTL", async () => {
    let now = 0;
    const cache = new ResponseCache({ ttlMs: 1000, maxEntries: 10, now: () => now });
    const page = deferred();
    let made = 0;
    const make = () => {
      made++;
      return page.promise;
    };
    const callers = Array.from({ length: 16 }, () => cache.fill("?region=eu-west", make));
    page.resolve("[1]");
    expect(await Promise.all(callers)).toEqual(Array(16).fill("[1]"));
    expect(made).toBe(1);
    expect(await cache.fill("?region=eu-west", async () => "[2]")).toBe("[1]");
    now = 1000;
    expect(await cache.fill("?region=eu-west", async () => "[2]")).toBe("[2]");
  });

  it("keeps no body made from what was read before a change: its callers get it, later ones a new one", async () => {
    const cache = new ResponseCache({ ttlMs: 1000, maxEntries: 10, now: () => 0 });
    const before = deferred();
    const first = cache.fill("", () => before.promise);
    cache.clear();
    const second = cache.fill("", async () => "after");
    before.resolve("before");
    expect(await first).toBe("before");
    expect(await second).toBe("after");
    expect(cache.get("")).toBe("after");
  });
});

import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors";
import { clientAddress, parseTrustedProxies } from "../../src/http/client-address";
import { rateLimit } from "../../src/middleware/rate-limit";

describe("clientAddress", () => {
  const proxies = parseTrustedProxies("127.0.0.1, 10.0.0.0/8, ::1");

  it("is the socket's peer when the peer is no trusted proxy, whatever X-Forwarded-For says", () => {
    expect(clientAddress("198.51.100.4", "203.0.113.9", proxies)).toBe("198.51.100.4");
    expect(clientAddress("198.51.100.4", undefined, parseTrustedProxies(""))).toBe("198.51.100.4");
    expect(clientAddress("127.0.0.1", "203.0.113.9", parseTrustedProxies(""))).toBe("127.0.0.1");
  });

  it("behind trusted proxies, is the nearest forwarded address that is not one of them", () => {
    expect(clientAddress("127.0.0.1", "203.0.113.9", proxies)).toBe("203.0.113.9");
    expect(clientAddress("::ffff:127.0.0.1", "203.0.113.9", proxies)).toBe("203.0.113.9");
    // A forged first hop stays to the left of what our proxies appended.
    expect(clientAddress("127.0.0.1", "1.2.3.4, 203.0.113.9, 10.1.2.3", proxies)).toBe("203.0.113.9");
    expect(clientAddress("::1", "2001:db8::7", proxies)).toBe("2001:db8::7");
    // Only proxies all the way: the farthest one is the client.
    expect(clientAddress("127.0.0.1", "10.0.0.2, 10.0.0.3", proxies)).toBe("10.0.0.2");
    // Garbage in the header is skipped; nothing usable leaves the peer.
    expect(clientAddress("127.0.0.1", "not-an-ip, ", proxies)).toBe("127.0.0.1");
  });

  it("refuses a TRUSTED_PROXIES entry that is no address or range, naming it", () => {
    expect(() => parseTrustedProxies("127.0.0.1, proxy.local")).toThrow('"proxy.local" is not an IP address or a CIDR range');
    expect(() => parseTrustedProxies("10.0.0.0/33")).toThrow('"10.0.0.0/33"');
    expect(parseTrustedProxies(" ").empty).toBe(true);
  });
});

describe("rateLimit", () => {
  it("drops the oldest windows past its size, so a flood of addresses cannot reset a limited client", async () => {
    let now = 0;
    const app = new Hono();
    app.onError((error, c) => c.text(error.message, error instanceof ApiError ? (error.status as 429) : 500));
    app.use("*", rateLimit({ limit: 1, windowMs: 60_000, clock: { now: () => now }, trustedProxies: parseTrustedProxies("0.0.0.0/0"), maxClients: 3 }));
    app.get("/", (c) => c.text("ok"));
    const from = (ip: string) =>
      app.request("/", { headers: { "x-forwarded-for": ip } }, { incoming: { socket: { remoteAddress: "127.0.0.1", remotePort: 1, remoteFamily: "IPv4" } } });
    expect((await from("203.0.113.1")).status).toBe(200);
    now = 1;
    expect((await from("203.0.113.2")).status).toBe(200);
    expect((await from("203.0.113.2")).status).toBe(429);
    // Two new clients fill the limiter: the oldest window (.1) goes, .2's stays.
    now = 2;
    await from("203.0.113.3");
    await from("203.0.113.4");
    expect((await from("203.0.113.2")).status).toBe(429);
    expect((await from("203.0.113.1")).status).toBe(200);
  });
});

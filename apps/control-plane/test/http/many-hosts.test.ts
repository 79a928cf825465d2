import net from "node:net";
import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

/** Writes raw bytes and answers all that comes back until the server closes. */
function exchange(port: number, text: string) {
  return new Promise<string>((resolve, reject) => {
    const s = net.connect(port, "127.0.0.1", () => s.write(text));
    let got = "";
    s.on("data", (d) => (got += d.toString("latin1")));
    s.on("close", () => resolve(got));
    s.on("error", reject);
  });
}

describe("a request with two Host headers", () => {
  let h: Harness;
  let port: number;
  beforeAll(async () => {
    h = await startHarness(sqlite);
    port = Number(new URL(h.url).port);
  });
  afterAll(() => h.close());

  it("is answered 400 in the error shape, for the API, an endpoint host and an upgrade alike (RFC 9112 §3.2)", async () => {
    const endpoint = "aaaaaaaaaaaaaaaa-8080.localhost";
    const requests = [
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n",
      `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: ${endpoint}\r\n\r\n`,
      `GET / HTTP/1.1\r\nHost: ${endpoint}\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET / HTTP/1.1\r\nHost: ${endpoint}\r\nhost: ${endpoint}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    ];
    for (const request of requests) {
      const reply = await exchange(port, request);
      expect(reply, request).toMatch(/^HTTP\/1\.1 400 /);
      const body = JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4));
      expect(body.error.code).toBe("VALIDATION_ERROR");
      expect(body.error.details).toEqual([{ field: "host", message: "appears more than once" }]);
      expect(reply).toMatch(new RegExp(`x-request-id: ${body.error.requestId}\r\n`, "i"));
    }
    // One Host is still served.
    expect(await exchange(port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 /);
  });
});

import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LINGER_MAX_BYTES } from "../../src/http/lingering-close";
import { type Harness, startHarness } from "../support/harness";
import { upload } from "../support/upload";

describe("a body refused before it was read", () => {
  let h: Harness;
  let port: number;
  beforeAll(async () => {
    h = await startHarness(sqlite, { config: { MAX_BODY_BYTES: 1024 * 1024 } });
    port = Number(new URL(h.url).port);
  });
  afterAll(() => h.close());

  it("gets its 413 in the error shape every time, the rest of the body read and dropped before the close", async () => {
    const size = 2 * 1024 * 1024;
    const head = `POST /auth/nonce HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`;
    const tries = await Promise.all(Array.from({ length: 20 }, () => upload(port, head, size, 2)));
    for (const t of tries) {
      expect(t.error).toBeUndefined();
      expect(t.reply).toMatch(/^HTTP\/1\.1 413 /);
      expect(JSON.parse(t.reply.slice(t.reply.indexOf("\r\n\r\n") + 4)).error.code).toBe("PAYLOAD_TOO_LARGE");
    }
  });

  it("stops reading a sender that does not stop, past the bound", async () => {
    const head = `POST /auth/nonce HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${2 ** 40}\r\n\r\n`;
    const t = await upload(port, head, Number.POSITIVE_INFINITY);
    expect(t.reply).toMatch(/^HTTP\/1\.1 413 /);
    // What the kernels' buffers hold on both sides comes on top of the bound.
    expect(t.written).toBeLessThan(LINGER_MAX_BYTES + 32 * 1024 * 1024);
  });
});

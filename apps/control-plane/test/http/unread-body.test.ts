import { sqliteDatabase as sqlite } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

describe("an answer given before the body was read", () => {
  let h: Harness;
  let token: string;
  beforeAll(async () => {
    h = await startHarness(sqlite);
    token = (await h.signIn()).token;
  });
  afterAll(() => h.close());

  const post = (path: string, authorization: string, body: unknown) =>
    fetch(h.url + path, { method: "POST", headers: { "content-type": "application/json", authorization }, body: JSON.stringify(body) }).then(
      async (res) => ({ status: res.status, connection: res.headers.get("connection"), text: await res.text() }),
      (e: Error) => ({ status: 0, connection: null, text: String(e.cause ?? e) }),
    );

  it("closes the connection, so the client's next requests do not land on one being dropped", async () => {
    // A 401 comes before the body is read; the server drains it only briefly before dropping the connection.
    const refused = await post("/operator/nodes", "Bearer cma_unknown", { name: "x", region: "a".repeat(900_000) });
    expect(refused.status).toBe(401);
    expect(refused.connection).toBe("close");
    const body = { name: "rig", region: "asia-east", country: "IW", hourlyRateCents: 0, maxDeployments: 1, unexpectedField: "x" };
    for (let i = 0; i < 5; i++) expect((await post("/operator/nodes", `Bearer ${token}`, body)).status, `request ${i}`).toBe(400);
  });

  it("keeps the connection when the body was read", async () => {
    const r = await post("/operator/nodes", `Bearer ${token}`, { name: "rig" });
    expect(r.status).toBe(400);
    expect(r.connection).toBe("keep-alive");
  });
});

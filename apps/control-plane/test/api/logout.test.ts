import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

describe("POST /auth/logout", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase);
  });
  afterAll(() => h.close());

  it("revokes the refresh token's whole family: the tokens refreshed from it, and the access tokens", async () => {
    const s = await h.signIn();
    const rotated = await h.call("POST", "/auth/refresh", { body: { refreshToken: s.refreshToken } });
    expect(rotated.status).toBe(200);
    const other = await h.signIn(s.wallet);

    const out = await h.call("POST", "/auth/logout", { body: { refreshToken: rotated.json.refreshToken } });
    expect(out.status).toBe(200);
    expect(out.json).toEqual({ success: true, message: expect.any(String) });

    expect((await h.call("GET", "/auth/me", { token: s.token })).json.error.code).toBe("UNAUTHORIZED");
    expect((await h.call("GET", "/auth/me", { token: rotated.json.accessToken })).json.error.code).toBe("UNAUTHORIZED");
    expect((await h.call("POST", "/auth/refresh", { body: { refreshToken: rotated.json.refreshToken } })).json.error.code).toBe("INVALID_REFRESH_TOKEN");
    // Another sign-in of the same wallet is another session.
    expect((await h.call("GET", "/auth/me", { token: other.token })).status).toBe(200);
  });

  it("takes a spent copy of the session's refresh token too", async () => {
    const s = await h.signIn();
    const rotated = await h.call("POST", "/auth/refresh", { body: { refreshToken: s.refreshToken } });
    expect((await h.call("POST", "/auth/logout", { body: { refreshToken: s.refreshToken } })).status).toBe(200);
    expect((await h.call("GET", "/auth/me", { token: rotated.json.accessToken })).status).toBe(401);
  });

  it("answers INVALID_REFRESH_TOKEN for a token it never issued, VALIDATION_ERROR without one", async () => {
    const unknown = await h.call("POST", "/auth/logout", { body: { refreshToken: "cmr_nope" } });
    expect(unknown.status).toBe(401);
    expect(unknown.json.error.code).toBe("INVALID_REFRESH_TOKEN");
    const missing = await h.call("POST", "/auth/logout", { body: {} });
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe("VALIDATION_ERROR");
  });

  it("is in the document", async () => {
    const doc = (await h.call("GET", "/openapi.json")).json;
    expect(doc.paths["/auth/logout"].post.responses["401"].description).toContain("INVALID_REFRESH_TOKEN");
  });
});

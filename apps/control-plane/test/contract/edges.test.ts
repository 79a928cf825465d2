import { sqliteDatabase } from "@cm/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, newWallet, startHarness } from "../support/harness";
import { documentedCodes, fetchDocument, type OpenApiDocument, schemaValidator } from "./support/document";

/*
 * What the fuzzer cannot reach with its harness (sign-in limits raised,
 * payments configured): the default rate limit, payments left unconfigured,
 * and URLs past what Node's parser takes. Each answer is held to the document.
 */

describe("edges of the contract the fuzzer does not reach", () => {
  let h: Harness;
  let doc: OpenApiDocument;
  beforeAll(async () => {
    // The defaults a deployment starts with: sign-in limited to 60 a minute, no treasury wallet.
    h = await startHarness(sqliteDatabase, { config: { AUTH_RATE_LIMIT_PER_MIN: 60 } });
    ({ doc } = await fetchDocument(h.url));
  });
  afterAll(() => h.close());

  function expectDocumented(method: string, path: string, status: number, body: unknown) {
    const response = doc.paths[path]?.[method]?.responses[String(status)];
    expect(response, `${method.toUpperCase()} ${path} documents ${status}`).toBeDefined();
    const schema = response!.content?.["application/json"]?.schema;
    if (schema) expect(schemaValidator(doc)(schema, body)).toEqual([]);
    const code = (body as { error?: { code?: string } }).error?.code;
    if (code) expect(documentedCodes(response), `${status} names ${code}`).toContain(code);
  }

  it("refuses a malformed deposit with 400 before it says payments are not configured", async () => {
    const { token, wallet } = await h.signIn();
    for (const body of [{}, { packageId: 5 }, { packageId: "pkg_starter" }, { packageId: "", walletAddress: wallet.address }]) {
      const r = await h.call("POST", "/credits/deposit/initiate", { token, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.code).toBe("VALIDATION_ERROR");
    }
    const wellFormed = await h.call("POST", "/credits/deposit/initiate", { token, body: { packageId: "pkg_starter", walletAddress: wallet.address } });
    expect(wellFormed.status).toBe(503);
    expect(wellFormed.json.error.code).toBe("PAYMENTS_NOT_CONFIGURED");
    expectDocumented("post", "/credits/deposit/initiate", 503, wellFormed.json);
  });

  it("never limits an authenticated read in the sign-in bucket, and documents the sign-in limit with Retry-After", async () => {
    const { token } = await h.signIn();
    const statuses = new Map<number, number>();
    for (let i = 0; i < 120; i++) {
      const r = await h.call("GET", "/auth/me", { token });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 200: 120 });

    // Sign-in itself is limited: past 60 a minute from one address, 429 with Retry-After.
    let limited: Awaited<ReturnType<Harness["call"]>> | undefined;
    for (let i = 0; i < 80 && !limited; i++) {
      const r = await h.call("POST", "/auth/nonce", { body: { walletAddress: newWallet().address } });
      if (r.status === 429) limited = r;
    }
    expect(limited?.status).toBe(429);
    expect(Number(limited!.headers.get("retry-after"))).toBeGreaterThan(0);
    expectDocumented("post", "/auth/nonce", 429, limited!.json);
    // Reads still answer while sign-in is limited.
    expect((await h.call("GET", "/auth/me", { token })).status).toBe(200);
  });

  it("a request refused before its body is read leaves its connection usable or closes it, never half-read", async () => {
    // The sign-in limit the test before spent is a minute's: let it pass.
    h.clock.advance(61_000);
    const { token } = await h.signIn();
    const node = JSON.stringify({ name: "n", region: "eu-west", country: "DE", hourlyRateCents: 1, maxDeployments: 1 });
    const post = (authorization: string, body: string) =>
      fetch(`${h.url}/operator/nodes`, { method: "POST", headers: { authorization, "content-type": "application/json" }, body }).then(
        async (res) => ({ status: res.status, connection: res.headers.get("connection") }),
        (e: Error) => ({ status: 0, connection: String(e.cause ?? e) }),
      );
    for (const size of [1024 * 1024 - 1024, 200_000]) {
      // Refused for its token before the server reads a byte of its body.
      const refused = await post("Bearer not-a-token", JSON.stringify({ name: "a".repeat(size) }));
      expect(refused.status).toBe(401);
      // The next requests share the client's kept-alive connections; none may be dropped.
      const next = [];
      for (let i = 0; i < 3; i++) next.push(await post(`Bearer ${token}`, node));
      expect(
        next.map((r) => r.status),
        `after a ${size}-byte body refused: ${JSON.stringify(next)}`,
      ).toEqual([201, 201, 201]);
    }
  });

  it("says in the document what it does with query text the schema does not decide (an unknown key, a boolean as 1)", async () => {
    const problems: string[] = [];
    const unknown = await h.call("GET", "/nodes?unknownKey=1");
    const said400 = `${doc.info.description ?? ""} ${doc.paths["/nodes"]!.get!.responses["400"]?.description ?? ""}`;
    if (unknown.status === 400 && !/unknown|unrecogni[sz]ed|not (named|listed|documented)/i.test(said400)) {
      problems.push(`GET /nodes?unknownKey=1 -> 400 ${unknown.json?.error?.code}, and the document never says an unknown query parameter is refused`);
    }
    const one = await h.call("GET", "/nodes?hasGpu=1");
    const hasGpu = doc.paths["/nodes"]!.get!.parameters!.find((p) => p.name === "hasGpu")!;
    const saidBoolean = `${hasGpu.description ?? ""} ${hasGpu.schema.description ?? ""}`;
    if (one.status === 200 && !/\b1\b/.test(saidBoolean))
      problems.push(`GET /nodes?hasGpu=1 -> 200, and the document's hasGpu is a boolean that never mentions 1 or 0`);
    expect(problems).toEqual([]);
  });

  it("answers a URL past 16 KiB with a JSON error in the one shape, not a reset or an empty body", async () => {
    const long: Array<[string, string]> = [
      ["/nodes", `/nodes?region=${"a".repeat(17_000)}`],
      ["/nodes/{id}", `/nodes/${"a".repeat(17_000)}`],
      ["/templates", `/templates?search=${"a".repeat(70_000)}`],
    ];
    for (const [operation, path] of long) {
      const r = await fetch(h.url + path).then(
        async (res) => ({ status: res.status, text: await res.text(), contentType: res.headers.get("content-type") }),
        (e: Error) => ({ status: 0, text: String(e.cause ?? e), contentType: null }),
      );
      expect(r.status, `${path.slice(0, 24)}… ${r.text}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.contentType).toMatch(/^application\/json/);
      const body = JSON.parse(r.text);
      expect(schemaValidator(doc)(doc.components.schemas.Error!, body)).toEqual([]);
      expect(["URI_TOO_LONG", "HEADERS_TOO_LARGE", "VALIDATION_ERROR"]).toContain(body.error.code);
      expectDocumented("get", operation, r.status, body);
    }
  });
});

import { randomBytes } from "node:crypto";
import { postgresDatabase } from "@cm/db/testing";
import { REGISTRY_CREDENTIALS_MAX, REGISTRY_PASSWORD_MAX_LENGTH } from "@cm/protocol";
import { describeEachDatabase, needs } from "@cm/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Harness, startHarness } from "../support/harness";

const KEY = randomBytes(32).toString("base64");
const PASSWORD = "s3cret-registry-password";

describeEachDatabase("registry credentials on $name", (db) => {
  let h: Harness;
  let tenant: { token: string; user: { id: string } };
  let other: { token: string };
  const api = (method: string, path: string, body?: unknown, token = tenant.token) => h.call(method, path, { token, ...(body ? { body } : {}) });

  beforeAll(async () => {
    h = await startHarness(db, { config: { REGISTRY_CREDENTIALS_KEY: KEY } });
    tenant = await h.signIn();
    other = await h.signIn();
    await h.grantCredits(tenant.user.id, 1_000);
  });
  afterAll(() => h.close());

  it("stores a credential and answers it, and lists it, without the password; the row holds it only sealed", async () => {
    const r = await api("POST", "/registry-credentials", { registry: "Registry.Example.com:5000", username: "ci", password: PASSWORD });
    expect(r.status, r.text).toBe(201);
    expect(r.json.credential).toEqual({
      id: expect.stringMatching(/^rcred_/),
      registry: "registry.example.com:5000",
      username: "ci",
      createdAt: expect.any(String),
      lastUsedAt: null,
    });
    expect(r.text).not.toContain(PASSWORD);
    const list = await api("GET", "/registry-credentials");
    expect(list.json.credentials).toEqual([r.json.credential]);
    expect(list.text).not.toContain(PASSWORD);
    const row = await h.deps.repos.registryCredentials.get(r.json.credential.id);
    expect(row!.secretSealed).not.toContain(PASSWORD);
    // Docker Hub's other names are Docker Hub.
    const hub = await api("POST", "/registry-credentials", { registry: "index.docker.io", username: "me", password: PASSWORD });
    expect(hub.json.credential.registry).toBe("docker.io");
    await api("DELETE", `/registry-credentials/${hub.json.credential.id}`);
  });

  it("refuses what is not a registry, an empty or oversized field, and unknown fields, naming the field", async () => {
    const bad = [
      [{ registry: "https://ghcr.io", username: "u", password: "p" }, "registry"],
      [{ registry: "ghcr.io/org", username: "u", password: "p" }, "registry"],
      [{ registry: "-bad.example", username: "u", password: "p" }, "registry"],
      [{ registry: "ghcr.io:99999999", username: "u", password: "p" }, "registry"],
      [{ registry: `${"a".repeat(300)}.io`, username: "u", password: "p" }, "registry"],
      [{ registry: "ghcr.io", username: "", password: "p" }, "username"],
      [{ registry: "ghcr.io", username: "u\u001b[31m", password: "p" }, "username"],
      [{ registry: "ghcr.io", username: "u", password: "" }, "password"],
      [{ registry: "ghcr.io", username: "u", password: "x".repeat(REGISTRY_PASSWORD_MAX_LENGTH + 1) }, "password"],
      [{ registry: "ghcr.io", username: "u", password: "a\u0000b" }, "password"],
      [{ registry: "ghcr.io", username: "u" }, "password"],
      [{ registry: "ghcr.io", username: "u", password: "p", email: "x@y" }, ""],
    ] as const;
    for (const [body, field] of bad) {
      const r = await api("POST", "/registry-credentials", body);
      expect([r.status, r.json.error.code], JSON.stringify(body).slice(0, 80)).toEqual([400, "VALIDATION_ERROR"]);
      if (field) expect(JSON.stringify(r.json.error.details)).toContain(field);
      expect(r.text).not.toContain("x".repeat(100));
    }
    expect((await h.call("POST", "/registry-credentials", { body: { registry: "ghcr.io", username: "u", password: "p" } })).status).toBe(401);
    expect((await h.call("GET", "/registry-credentials")).status).toBe(401);
  });

  it("keeps each tenant's credentials to themselves: another's id is 404 to delete and to deploy with", async () => {
    const mine = (await api("POST", "/registry-credentials", { registry: "ghcr.io", username: "me", password: PASSWORD })).json.credential;
    expect((await api("GET", "/registry-credentials", undefined, other.token)).json.credentials).toEqual([]);
    const del = await api("DELETE", `/registry-credentials/${mine.id}`, undefined, other.token);
    expect([del.status, del.json.error.code]).toEqual([404, "REGISTRY_CREDENTIAL_NOT_FOUND"]);
    const dep = await api("POST", "/deployments", { nodeId: "node_x", customImage: "ghcr.io/acme/app:1", registryCredentialId: mine.id }, other.token);
    expect([dep.status, dep.json.error.code]).toEqual([404, "REGISTRY_CREDENTIAL_NOT_FOUND"]);
    expect((await api("GET", "/registry-credentials")).json.credentials.map((c: { id: string }) => c.id)).toContain(mine.id);
    const gone = await api("DELETE", `/registry-credentials/${mine.id}`);
    expect(gone.json).toEqual({ success: true, message: "registry credential deleted" });
    expect((await api("DELETE", `/registry-credentials/${mine.id}`)).status).toBe(404);
  });

  it("checks a deployment's credential before anything else is looked at or held: unknown, or for another registry than the image's", async () => {
    const ghcr = (await api("POST", "/registry-credentials", { registry: "ghcr.io", username: "me", password: PASSWORD })).json.credential;
    const unknown = await api("POST", "/deployments", { nodeId: "node_nope", customImage: "ghcr.io/acme/app:1", registryCredentialId: "rcred_nope" });
    expect([unknown.status, unknown.json.error.code]).toEqual([404, "REGISTRY_CREDENTIAL_NOT_FOUND"]);
    for (const image of ["acme/app:1", "quay.io/acme/app:1", "ghcr.io:5000/acme/app"]) {
      const r = await api("POST", "/deployments", { nodeId: "node_nope", customImage: image, registryCredentialId: ghcr.id });
      expect([r.status, r.json.error.code], image).toEqual([422, "REGISTRY_CREDENTIAL_MISMATCH"]);
      expect(r.json.error.details.registry).toBe("ghcr.io");
    }
    const estimate = await api("POST", "/deployments/estimate", { nodeId: "node_nope", customImage: "busybox", registryCredentialId: ghcr.id });
    expect(estimate.json.error.code).toBe("REGISTRY_CREDENTIAL_MISMATCH");
    // The credential fits: the next check (the node) answers.
    const fits = await api("POST", "/deployments", { nodeId: "node_nope", customImage: "GHCR.io/acme/app:1", registryCredentialId: ghcr.id });
    expect(fits.json.error.code).toBe("NODE_NOT_FOUND");
    expect((await api("GET", "/credits/balance")).json.balance.reserved).toBe(0);
    const tooLong = await api("POST", "/deployments", { nodeId: "node_nope", customImage: "ghcr.io/a", registryCredentialId: "r".repeat(65) });
    expect([tooLong.status, tooLong.json.error.code]).toEqual([400, "VALIDATION_ERROR"]);
  });

  it(`stores at most ${REGISTRY_CREDENTIALS_MAX} per account, even when added in parallel`, async () => {
    const t = await h.signIn();
    const add = (i: number) => api("POST", "/registry-credentials", { registry: `r${i}.example.com`, username: "u", password: "p" }, t.token);
    const answers = await Promise.all(Array.from({ length: REGISTRY_CREDENTIALS_MAX + 5 }, (_, i) => add(i)));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(REGISTRY_CREDENTIALS_MAX);
    expect(answers.filter((a) => a.status === 403).map((a) => a.json.error.code)).toEqual(Array(5).fill("REGISTRY_CREDENTIAL_QUOTA_EXCEEDED"));
    expect((await api("GET", "/registry-credentials", undefined, t.token)).json.credentials).toHaveLength(REGISTRY_CREDENTIALS_MAX);
  });
});

needs("postgres").describe("registry credentials on PostgreSQL without REGISTRY_CREDENTIALS_KEY", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(postgresDatabase);
  });
  afterAll(() => h?.close());

  it("are refused with a code that says what to set, storing nothing", async () => {
    const t = await h.signIn();
    const r = await h.call("POST", "/registry-credentials", { token: t.token, body: { registry: "ghcr.io", username: "u", password: PASSWORD } });
    expect([r.status, r.json.error.code]).toEqual([503, "REGISTRY_CREDENTIALS_NOT_CONFIGURED"]);
    expect(r.json.error.message).toContain("REGISTRY_CREDENTIALS_KEY");
    expect((await h.call("GET", "/registry-credentials", { token: t.token })).json.credentials).toEqual([]);
  });
});

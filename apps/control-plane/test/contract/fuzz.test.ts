import { describeEachDatabase } from "@cm/testkit";
import { Keypair } from "@solana/web3.js";
import fc from "fast-check";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type FakeSolanaRpc, startFakeSolanaRpc } from "../support/fake-solana-rpc";
import { type Harness, newWallet, startHarness } from "../support/harness";
import { payoutKeyFile } from "../support/payouts";
import type { Fixtures } from "./support/arbitraries";
import { type DocumentedOperation, fetchDocument, type OpenApiDocument, operationsOf, schemaValidator, type Validator } from "./support/document";
import { exercise, type Figures, type Violation } from "./support/judge";
import { boundaryExamples, type FuzzRequest, requestArbitrary } from "./support/requests";

/*
 * The document drives a fuzzer against a real server, on SQLite and on
 * PostgreSQL: for every operation it generates requests from the document's
 * schemas (valid ones, and valid ones with one thing broken), with and without
 * a token, and holds the answers to the document. Violations are collected per
 * operation, one example each, so a run names every disagreement at once.
 */

const SEED = 20261125;
const RUNS_PER_OPERATION = 40;

/**
 * The same seed sends the same requests to both databases, so their answers
 * (status and error code) are compared request by request: the first database
 * run records them, the next is held to them.
 */
const firstAnswers = new Map<string, { database: string; answers: string[] }>();

describeEachDatabase("the server agrees with its OpenAPI document under fuzzing on $name", (db) => {
  let h: Harness;
  let rpc: FakeSolanaRpc;
  let doc: OpenApiDocument;
  let validate: Validator;
  let token: string;
  const fixtures: Fixtures = {};
  const pathFixtures: Record<string, string[]> = {};
  let started = 0;
  const figures: Figures = { requests: 0, valid: 0, invalid: 0, undecided: 0, slowestMs: 0, statuses: new Map() };
  const statusesByOperation: string[] = [];

  beforeAll(async () => {
    started = Date.now();
    rpc = await startFakeSolanaRpc();
    h = await startHarness(db, {
      // A hot wallet, so payout requests are judged (minimum, available) rather than refused as unconfigured.
      config: {
        TREASURY_WALLET: newWallet().address,
        SOLANA_RPC_URL: rpc.url,
        NODE_REGISTRATIONS_PER_HOUR: 100_000,
        PAYOUT_KEYPAIR: payoutKeyFile(Keypair.generate()),
        // A key on both databases, so registry credentials are judged rather than refused as unconfigured on PostgreSQL.
        REGISTRY_CREDENTIALS_KEY: "ab".repeat(32),
      },
    });
    ({ doc } = await fetchDocument(h.url));
    validate = schemaValidator(doc);

    // One account that operates nodes and rents them, with credits to spare.
    const me = await h.signIn();
    const spare = await h.signIn();
    token = me.token;
    await h.grantCredits(me.user.id, 1_000_000);
    const online = await h.onlineNode(token, {
      maxDeployments: 256,
      hourlyRateCents: 1,
      cpuCores: 64,
      ramMb: 512_000,
      gpus: [{ name: "NVIDIA H100 80GB HBM3", vramMb: 81559 }],
    });
    const offline = await h.call("POST", "/operator/nodes", {
      token,
      body: { name: "offline", region: "us-east", country: "US", hourlyRateCents: 5, maxDeployments: 2 },
    });
    const nodeIds = [online.id, offline.json.node.id as string];
    const templates = (await h.call("GET", "/templates")).json.templates as Array<{ id: string; slug: string }>;
    const deployments: string[] = [];
    for (const image of ["nginx:1.27", "redis:7"])
      deployments.push((await h.call("POST", "/deployments", { token, body: { nodeId: online.id, customImage: image } })).json.deployment.id);
    // For Docker Hub, the registry of the fixtures' images: a create naming it is judged on the rest.
    const credential = await h.call("POST", "/registry-credentials", { token, body: { registry: "docker.io", username: "fuzz", password: "fuzz-secret" } });
    const apiKey = await h.call("POST", "/auth/api-keys", { token, body: { name: "fuzz", scopes: ["read"] } });
    const packages = (await h.call("GET", "/credits/packages", { token })).json.packages as Array<{ id: string }>;
    const deposit = await h.call("POST", "/credits/deposit/initiate", { token, body: { packageId: packages[0]!.id, walletAddress: me.wallet.address } });

    Object.assign(fixtures, {
      nodeId: nodeIds,
      templateId: templates.map((t) => t.id),
      packageId: packages.map((p) => p.id),
      depositId: deposit.status === 200 ? [deposit.json.deposit.depositId] : [],
      walletAddress: [me.wallet.address],
      // Another session's: refreshing rotates it and ends its access token, which the fuzzer's own must outlive.
      refreshToken: [spare.refreshToken],
      customImage: ["nginx:1.27"],
      registryCredentialId: [credential.json.credential.id],
    });
    Object.assign(pathFixtures, {
      "/nodes/{id}": nodeIds,
      "/operator/nodes/{id}": nodeIds,
      "/templates/{idOrSlug}": templates.flatMap((t) => [t.id, t.slug]),
      "/deployments/{id}": deployments,
      "/credits/deposits/{id}": deposit.status === 200 ? [deposit.json.deposit.depositId] : [],
      "/registry-credentials/{id}": [credential.json.credential.id],
      "/auth/api-keys/{id}": [apiKey.json.apiKey.id],
    });
  });
  afterAll(async () => {
    await h?.close();
    await rpc?.close();
    console.log(
      `fuzz on ${db.name}: ${figures.requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s; ${figures.valid} valid, ${figures.invalid} invalid, ${figures.undecided} undecided by the document; slowest answer ${figures.slowestMs} ms; statuses ${JSON.stringify(Object.fromEntries([...figures.statuses].sort(([a], [b]) => a - b)))}\n  ${statusesByOperation.join("\n  ")}`,
    );
  });

  // Reads first, then writes, then removals, so fixtures live as long as possible.
  const order = (o: { method: string }) => ({ get: 0, post: 1, delete: 2 })[o.method] ?? 1;
  const planned = [
    "GET /health",
    "GET /ready",
    "POST /auth/nonce",
    "POST /auth/verify",
    "POST /auth/refresh",
    "GET /auth/me",
    "POST /auth/api-keys",
    "GET /auth/api-keys",
    "DELETE /auth/api-keys/{id}",
    "GET /nodes",
    "GET /nodes/{id}",
    "POST /operator/nodes",
    "GET /operator/nodes",
    "DELETE /operator/nodes/{id}",
    "PATCH /operator/nodes/{id}",
    "POST /operator/nodes/{id}/maintenance",
    "GET /operator/nodes/{id}/deployments",
    "GET /operator/earnings",
    "GET /operator/earnings/transactions",
    "POST /operator/payouts",
    "GET /operator/payouts",
    "GET /operator/payouts/{id}",
    "GET /agent/whoami",
    "GET /templates",
    "GET /templates/{idOrSlug}",
    "POST /deployments",
    "POST /deployments/estimate",
    "GET /deployments",
    "GET /deployments/{id}",
    "DELETE /deployments/{id}",
    "POST /deployments/{id}/start",
    "POST /deployments/{id}/stop",
    "GET /deployments/{id}/logs",
    // Refusals only (no deployment the fuzzer reaches has a node connected): e2e/files.test.ts reads archives.
    "GET /deployments/{id}/files",
    // Plain GETs only: the fuzzer never upgrades, so nothing is dialled (e2e/tcp-ports.test.ts does).
    "GET /deployments/{id}/tcp/{port}",
    "GET /credits/balance",
    "GET /credits/packages",
    "POST /credits/deposit/initiate",
    "POST /credits/deposit/confirm",
    "GET /credits/deposits/{id}",
    "GET /credits/transactions",
    "POST /registry-credentials",
    "GET /registry-credentials",
    "DELETE /registry-credentials/{id}",
  ]
    .map((s) => ({ method: s.split(" ")[0]!.toLowerCase(), path: s.split(" ")[1]! }))
    .sort((a, b) => order(a) - order(b));

  // Documented but not fuzzed: the logs and events streams answer events, not JSON, and stay
  // open while their deployment lives; exec is a WebSocket upgrade into a running container;
  // a logout would revoke the session the fuzzer signs with. Their own tests are
  // test/api/logs-stream.test.ts, deployment-events.test.ts, e2e/exec.test.ts and logout.test.ts.
  const notFuzzed = ["post /auth/logout", "get /deployments/{id}/logs/stream", "get /deployments/{id}/events", "get /deployments/{id}/exec"];

  it("documents every operation the fuzzer plans to send", () => {
    const documented = operationsOf(doc).map((o) => `${o.method} ${o.path}`);
    expect(documented.sort()).toEqual([...planned.map((o) => `${o.method} ${o.path}`), ...notFuzzed].sort());
  });

  for (const { method, path } of planned) {
    it(`${method.toUpperCase()} ${path}: ${RUNS_PER_OPERATION} generated requests and one at each bound, answered as documented`, async () => {
      const op = doc.paths[path]?.[method];
      if (!op) throw new Error(`${method.toUpperCase()} ${path} is not in the document`);
      const target: DocumentedOperation = { method, path, op };
      const violations = new Map<string, Violation & { count: number }>();
      const answers: string[] = [];
      let previous: string[] = [];
      const first = firstAnswers.get(`${method} ${path}`);
      const note = (v: Violation) => {
        const seen = violations.get(v.rule);
        if (seen) seen.count++;
        else violations.set(v.rule, { ...v, count: 1 });
      };
      const pathIds = pathFixtures[path.replace(/\/(start|stop|logs|maintenance|deployments)$/, "")] ?? [];
      const arbitrary = requestArbitrary(doc, target, fixtures, pathIds);
      const examples = boundaryExamples(doc, target, fixtures, pathIds, SEED).map((req) => [req] as [FuzzRequest]);
      await fc.assert(
        fc.asyncProperty(arbitrary, async (req) => {
          const { found, request, answer } = await exercise(h.url, doc, validate, target, req, token, figures);
          // A dropped connection may be the previous request's doing: say which it was.
          for (const v of found) note(v.rule.startsWith("no answer") ? { ...v, answer: `${v.answer}; the requests before: ${previous.join(" | ")}` } : v);
          previous = [...previous.slice(-2), `${request.slice(0, 160)} -> ${answer}`];
          const earlier = first?.answers[answers.length];
          if (earlier !== undefined && earlier !== answer)
            note({ rule: `${first!.database} and ${db.name} answer differently`, request, answer: `${first!.database}: ${earlier}; ${db.name}: ${answer}` });
          answers.push(answer);
        }),
        { seed: SEED, numRuns: RUNS_PER_OPERATION + examples.length, endOnFailure: true, examples },
      );
      if (!first) firstAnswers.set(`${method} ${path}`, { database: db.name, answers });
      statusesByOperation.push(`${method.toUpperCase()} ${path} ${[...new Set(answers)].sort().join(",")}`);
      const found = [...violations.values()].map((v) => `${v.rule} (${v.count}x), e.g. ${v.request} -> ${v.answer}`);
      if (found.length) throw new Error(`${method.toUpperCase()} ${path} disagrees with the document:\n${found.join("\n")}`);
    });
  }
});

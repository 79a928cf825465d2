import { execFile } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { sqliteDatabase } from "@cm/testkit";
import openapiTS, { astToString } from "openapi-typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, newWallet, startHarness } from "../support/harness";
import { fetchDocument } from "./support/document";

/*
 * What an integrator does with the document: generate types with
 * openapi-typescript, write a client on openapi-fetch, compile it under
 * `strict`, and run it. The client lives in a temporary folder outside the
 * repository so nothing here (no path alias, no shared type) helps it.
 */

const REPO = resolve(import.meta.dirname, "../../../..");
const run = promisify(execFile);

/** The integrator's code: only openapi-fetch and the generated types. */
const CLIENT = `
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

type Schemas = components["schemas"];

export type Session = {
  user: Schemas["User"];
  accessToken: string;
  expiresAt: number;
};

export async function signIn(baseUrl: string, walletAddress: string, sign: (message: string) => string): Promise<Session> {
  const api = createClient<paths>({ baseUrl });
  const nonce = await api.POST("/auth/nonce", { body: { walletAddress } });
  if (!nonce.data) throw new Error(\`nonce: \${nonce.response.status} \${nonce.error?.error.code}\`);
  const message: string = nonce.data.message;
  const expiresAt: number = nonce.data.expiresAt;
  if (expiresAt < Date.UTC(2020, 0, 1)) throw new Error("expiresAt is not epoch milliseconds");
  const verified = await api.POST("/auth/verify", { body: { walletAddress, message, signature: sign(message) } });
  if (!verified.data) throw new Error(\`verify: \${verified.response.status} \${verified.error?.error.code}\`);
  return { user: verified.data.user, accessToken: verified.data.accessToken, expiresAt: verified.data.expiresAt };
}

/** Reads every catalogue route with the session's token, and refreshes it. */
export async function readEverything(baseUrl: string, token: string, refreshToken: string, nodeId: string) {
  const api = createClient<paths>({ baseUrl, headers: { Authorization: \`Bearer \${token}\` } });

  const me = await api.GET("/auth/me");
  const isOperator: boolean | undefined = me.data?.user.isOperator;

  const templates = await api.GET("/templates", { params: { query: { requiresGpu: false } } });
  const llm = await api.GET("/templates", { params: { query: { category: "llm", search: "a" } } });
  const firstSlug: string | undefined = templates.data?.templates[0]?.slug;
  const template = await api.GET("/templates/{idOrSlug}", { params: { path: { idOrSlug: firstSlug ?? "none" } } });
  const ports: number[] = (template.data?.template.ports ?? []).map((p) => p.internal);
  const missingTemplate = await api.GET("/templates/{idOrSlug}", { params: { path: { idOrSlug: "no-such-template" } } });

  const nodes = await api.GET("/nodes", { params: { query: { status: "online", hasGpu: false, region: "eu-west", minCpuCores: 1, maxHourlyRate: 1000, page: 1, limit: 10 } } });
  const node = await api.GET("/nodes/{id}", { params: { path: { id: nodeId } } });
  const cpuCores: number | undefined = node.data?.node.specs.cpuCores;
  const missingNode = await api.GET("/nodes/{id}", { params: { path: { id: "node_missing" } } });
  const missingCode: string | undefined = missingNode.error?.error.code;

  const balance = await api.GET("/credits/balance");
  const available: number | undefined = balance.data?.balance.available;
  const packages = await api.GET("/credits/packages");
  const transactions = await api.GET("/credits/transactions", { params: { query: { type: "deposit", page: 1, limit: 5 } } });

  const created = await api.POST("/deployments", { body: { nodeId, customImage: "nginx:1.27", name: "typed", env: { GREETING: "hi" } } });
  const deploymentId = created.data?.deployment.id ?? "none";
  const deployments = await api.GET("/deployments", { params: { query: { status: "pending", page: 1, limit: 100 } } });
  const deployment = await api.GET("/deployments/{id}", { params: { path: { id: deploymentId } } });
  const logs = await api.GET("/deployments/{id}/logs", { params: { path: { id: deploymentId }, query: { tail: 10 } } });
  const removed = await api.DELETE("/deployments/{id}", { params: { path: { id: deploymentId } } });

  const refreshed = await createClient<paths>({ baseUrl }).POST("/auth/refresh", { body: { refreshToken } });

  return {
    me: { status: me.response.status, user: me.data?.user, isOperator },
    templates: { status: templates.response.status, count: templates.data?.templates.length, llm: llm.data?.templates.map((t) => t.category) },
    template: { status: template.response.status, slug: template.data?.template.slug, image: template.data?.template.containerImage, ports },
    missingTemplate: { status: missingTemplate.response.status, code: missingTemplate.error?.error.code },
    nodes: { status: nodes.response.status, ids: nodes.data?.nodes.map((n) => n.id), pagination: nodes.data?.pagination },
    node: { status: node.response.status, id: node.data?.node.id, cpuCores, region: node.data?.node.region },
    missingNode: { status: missingNode.response.status, code: missingCode, requestId: missingNode.error?.error.requestId },
    balance: { status: balance.response.status, available, reserved: balance.data?.balance.reserved },
    packages: { status: packages.response.status, ids: packages.data?.packages.map((p) => p.id) },
    transactions: { status: transactions.response.status, types: transactions.data?.transactions.map((t) => t.type), pagination: transactions.data?.pagination },
    created: { status: created.response.status, deployment: created.data?.deployment, estimatedHourlyCost: created.data?.estimatedHourlyCost },
    deployments: { status: deployments.response.status, ids: deployments.data?.deployments.map((d) => d.id) },
    deployment: { status: deployment.response.status, status_: deployment.data?.deployment.status },
    logs: { status: logs.response.status, lines: logs.data?.logs.map((l) => l.message) },
    removed: { status: removed.response.status, success: removed.data?.success },
    refreshed: { status: refreshed.response.status, hasToken: typeof refreshed.data?.accessToken === "string" },
  };
}

/** Never called: proves the generated types are precise, not any. */
export function typesRefuse(api: ReturnType<typeof createClient<paths>>) {
  // @ts-expect-error not a region of the document
  void api.GET("/nodes", { params: { query: { region: "mars" } } });
  // @ts-expect-error hasGpu is a boolean
  void api.GET("/nodes", { params: { query: { hasGpu: "yes" } } });
  // @ts-expect-error gpuCount is a number
  void api.POST("/deployments", { body: { customImage: "nginx", gpuCount: "2" } });
  // @ts-expect-error no such path
  void api.GET("/nodez");
  // @ts-expect-error walletAddress is a string
  void api.POST("/auth/nonce", { body: { walletAddress: 1 } });
  // @ts-expect-error a template category is one of the enum
  void api.GET("/templates", { params: { query: { category: "games" } } });
}
`;

/** What the test needs to know of client.ts, which it imports at run time. */
type GeneratedClient = {
  signIn(
    baseUrl: string,
    walletAddress: string,
    sign: (message: string) => string,
  ): Promise<{ user: { id: string; walletAddress: string }; accessToken: string; expiresAt: number }>;
  // biome-ignore lint/suspicious/noExplicitAny: the answers are asserted field by field below
  readEverything(baseUrl: string, token: string, refreshToken: string, nodeId: string): Promise<Record<string, any>>;
};

const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    module: "ESNext",
    moduleResolution: "Bundler",
    lib: ["ES2022", "DOM"],
    types: [],
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    noEmit: true,
    skipLibCheck: false,
  },
  files: ["client.ts", "schema.ts"],
};

describe("a client generated from the document by openapi-typescript and openapi-fetch", () => {
  let h: Harness;
  let dir: string;
  beforeAll(async () => {
    h = await startHarness(sqliteDatabase);
    dir = await mkdtemp(join(tmpdir(), "cm-typed-client-"));
    const { doc } = await fetchDocument(h.url);
    const ast = await openapiTS(doc as never);
    await writeFile(join(dir, "schema.ts"), astToString(ast));
    await writeFile(join(dir, "client.ts"), CLIENT);
    await writeFile(join(dir, "tsconfig.json"), JSON.stringify(TSCONFIG, null, 2));
    // The integrator's own node_modules: openapi-fetch alone.
    await mkdir(join(dir, "node_modules"));
    await symlink(join(REPO, "node_modules/openapi-fetch"), join(dir, "node_modules/openapi-fetch"), "dir");
  });
  afterAll(async () => {
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("generates types that name every operation and compile under strict", async () => {
    const compiled = await run(join(REPO, "node_modules/.bin/tsc"), ["-p", join(dir, "tsconfig.json")], { cwd: dir }).then(
      () => "",
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ""}${e.stderr ?? ""}`,
    );
    expect(compiled).toBe("");
  }, 120_000);

  it("signs in and reads every catalogue route against a fresh control plane", async () => {
    const operator = await h.signIn();
    const node = await h.onlineNode(operator.token, { cpuCores: 8, ramMb: 32_000, region: "eu-west", hourlyRateCents: 10 });
    const client = (await import(pathToFileURL(join(dir, "client.ts")).href)) as GeneratedClient;

    const wallet = newWallet();
    const session = await client.signIn(h.url, wallet.address, wallet.sign);
    expect(session.user.walletAddress).toBe(wallet.address);
    expect(session.expiresAt).toBeGreaterThan(h.clock.now());
    await h.grantCredits(session.user.id, 1000);
    const refreshToken = (await h.signIn(wallet)).refreshToken;

    const r = await client.readEverything(h.url, session.accessToken, refreshToken, node.id);
    expect(r.me).toMatchObject({ status: 200, user: { id: session.user.id, walletAddress: wallet.address }, isOperator: false });
    expect(r.templates.status).toBe(200);
    expect(r.templates.count).toBeGreaterThan(0);
    expect(r.templates.llm?.every((c: string) => c === "llm")).toBe(true);
    expect(r.template.status).toBe(200);
    expect(r.template.slug).toBeTruthy();
    expect(r.template.image).toBeTruthy();
    expect(r.missingTemplate).toEqual({ status: 404, code: "TEMPLATE_NOT_FOUND" });
    expect(r.nodes.status).toBe(200);
    expect(r.nodes.ids).toContain(node.id);
    expect(r.nodes.pagination).toMatchObject({ page: 1, limit: 10 });
    expect(r.node).toEqual({ status: 200, id: node.id, cpuCores: 8, region: "eu-west" });
    expect(r.missingNode).toMatchObject({ status: 404, code: "NODE_NOT_FOUND" });
    expect(r.missingNode.requestId).toBeTruthy();
    expect(r.balance).toEqual({ status: 200, available: 1000, reserved: 0 });
    expect(r.packages.status).toBe(200);
    expect(r.packages.ids?.length).toBeGreaterThan(0);
    expect(r.transactions).toMatchObject({ status: 200, types: ["deposit"], pagination: { page: 1, limit: 5, total: 1 } });
    expect(r.created.status).toBe(201);
    expect(r.created.deployment).toMatchObject({ nodeId: node.id, name: "typed", status: "pending", endpoints: [], env: { GREETING: "hi" }, totalCost: 0 });
    expect(r.created.estimatedHourlyCost).toBe(10);
    expect(r.deployments).toEqual({ status: 200, ids: [r.created.deployment?.id] });
    expect(r.deployment).toEqual({ status: 200, status_: "pending" });
    expect(r.logs).toEqual({ status: 200, lines: [] });
    expect(r.removed).toEqual({ status: 200, success: true });
    expect(r.refreshed).toEqual({ status: 200, hasToken: true });
  });
});

import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { OpenAPIHono } from "@hono/zod-openapi";
import { Hono } from "hono";
import type { AppEnv } from "../http/env";
import { REQUEST_ID_HEADER_COMPONENT } from "../http/route";

const require = createRequire(import.meta.url);

type Api = OpenAPIHono<AppEnv>;
type Document = ReturnType<Api["getOpenAPI31Document"]>;

const TAGS = [
  { name: "auth", description: "Sign in with a Solana wallet signature; tokens for the other groups; API keys for scripts." },
  { name: "nodes", description: "The public catalogue of nodes to rent." },
  { name: "templates", description: "The public catalogue of container templates." },
  { name: "deployments", description: "Your containers on rented nodes." },
  {
    name: "registry-credentials",
    description: "Your logins to private container registries, for deployments of private images. Passwords are sealed and never shown back.",
  },
  { name: "credits", description: "Your balance, USDC deposits and ledger. 1 credit = 1 US cent." },
  { name: "operator", description: "The nodes you operate." },
  { name: "agent", description: "What a node's agent asks with its agent token, besides its own WebSocket (packages/protocol)." },
  { name: "operations", description: "Liveness and readiness probes." },
];

/** The document of every route mounted on `api`, as the library generates it, with what no route says. */
export function openApiDocument(api: Api): Document {
  api.openAPIRegistry.registerComponent("securitySchemes", "bearer", {
    type: "http",
    scheme: "bearer",
    description:
      "accessToken from POST /auth/verify or /auth/refresh (a wallet session: every route), or an API key (cmk_...) from POST /auth/api-keys: the routes whose x-scope is one of its scopes (x-scope 'any': every key); others answer 403 INSUFFICIENT_SCOPE. x-scope 'session': a wallet session only",
  });
  api.openAPIRegistry.registerComponent("headers", "RequestId", REQUEST_ID_HEADER_COMPONENT);
  const doc = api.getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Compute marketplace API",
      version: "1.0.0",
      description:
        "Rent GPU nodes and run containers on them. Credits: 1 credit = 1 US cent. Errors share one shape: { error: { code, message, requestId, details? } }; " +
        "every response carries the request id in X-Request-Id. An unknown query parameter or body field (one not named in this document) is refused: 400 VALIDATION_ERROR naming it. " +
        "A URL over 16 KiB is answered 414, a body over the configured limit 413.",
    },
    servers: [{ url: "/", description: "the control plane serving this document" }],
    tags: TAGS,
  });
  // Nothing is registered there: left out rather than shown empty.
  const { webhooks: _webhooks, ...rest } = doc;
  const { parameters: _parameters, ...components } = rest.components ?? {};
  return { ...rest, components };
}

/**
 * /openapi.json, generated once on first request from the routes mounted on
 * `api`, and Swagger UI served from the installed package: the docs work with
 * no internet.
 */
export function docsRoutes(api: Api) {
  const uiDir = path.dirname(require.resolve("swagger-ui-dist/package.json"));
  const assets: Record<string, string> = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
  };
  let doc: Document | undefined;
  return new Hono<AppEnv>()
    .get("/openapi.json", (c) => {
      doc ??= openApiDocument(api);
      return c.json(doc);
    })
    .get("/docs", (c) =>
      c.html(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Compute marketplace API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#ui", deepLinking: true });</script>
</body></html>`),
    )
    .get("/docs/:asset", (c) => {
      const type = assets[c.req.param("asset")];
      if (!type) return c.notFound();
      return c.body(fs.readFileSync(path.join(uiDir, c.req.param("asset"))), 200, { "content-type": type, "cache-control": "public, max-age=86400" });
    });
}

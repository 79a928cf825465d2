import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import type { Hono } from "hono";
import type { AppEnv } from "../http/env";
import type { OpenApiRegistry } from "../http/openapi";

const require = createRequire(import.meta.url);

/** Swagger UI served from the installed package: the docs work with no internet. */
export function docsRoutes(app: Hono<AppEnv>, registry: OpenApiRegistry) {
  const uiDir = path.dirname(require.resolve("swagger-ui-dist/package.json"));
  const assets: Record<string, string> = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
  };
  let doc: unknown;
  app.get("/openapi.json", (c) => c.json((doc ??= registry.document())));
  app.get("/docs", (c) =>
    c.html(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Compute marketplace API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#ui", deepLinking: true });</script>
</body></html>`),
  );
  app.get("/docs/:asset", (c) => {
    const name = c.req.param("asset");
    const type = assets[name];
    if (!type) return c.notFound();
    return c.body(fs.readFileSync(path.join(uiDir, name)), 200, { "content-type": type, "cache-control": "public, max-age=86400" });
  });
}

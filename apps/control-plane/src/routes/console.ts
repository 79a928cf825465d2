import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Context } from "hono";
import { Hono } from "hono";
import { ApiError, errorResponse } from "../errors";
import type { AppEnv } from "../http/env";

/** Where the console lives in the URL space: the SPA's own router works below it (apps/console/src/router). */
export const CONSOLE_PATH = "/app";

const HERE = path.dirname(fileURLToPath(import.meta.url));

/**
 * The built console (apps/console/dist) when none is configured: from the sources, this file is
 * apps/control-plane/src/routes/; from a release, the bundle is lib/control-plane.mjs and the
 * release carries the console in console/ beside lib/ (scripts/release/release.ts).
 */
export function defaultConsoleDir(): string {
  return HERE.endsWith(path.join("src", "routes")) ? path.resolve(HERE, "../../../console/dist") : path.resolve(HERE, "../console");
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".txt": "text/plain; charset=utf-8",
  ".woff2": "font/woff2",
};

/** Vite names every file under assets/ by its content's hash: a new build is new URLs, so browsers may keep these for good. */
const IMMUTABLE = "public, max-age=31536000, immutable";

// A Host that can be written into a header as it is: a name or address and a port, nothing else.
const PLAIN_HOST = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * The console's Content-Security-Policy: its own scripts and styles only (nothing inline, nothing
 * third-party, so a script injected into a page cannot run and read the session); calls to this
 * origin, its WebSocket (a deployment's terminal, the exec route) and the Solana RPC (a wallet's
 * payment is sent through it from the page); no framing (clickjacking); wallet icons are data: URLs.
 */
export function consoleCsp(host: string | undefined, rpcUrl: string | undefined): string {
  const connect = ["'self'"];
  if (host && PLAIN_HOST.test(host)) connect.push(`ws://${host}`, `wss://${host}`);
  if (rpcUrl) {
    const rpc = new URL(rpcUrl);
    connect.push(rpc.origin, `${rpc.protocol === "https:" ? "wss" : "ws"}://${rpc.host}`);
  }
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src ${connect.join(" ")}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "object-src 'none'",
  ].join("; ");
}

/**
 * The web console (apps/console), built into static files, under /app/: a file when one is at the
 * path, index.html for any other path (the SPA's routes), and `/` sends a browser there. Mounted on
 * the API's app, so only the API's host serves it: a tenant endpoint's host never reaches this app
 * (server.ts hands those to the gateway first), and the console's origin stays the API's.
 */
export function consoleRoutes(o: { dir: string; rpcUrl?: string; stableDecimals?: number }) {
  const root = path.resolve(o.dir);

  const secure = (c: Context<AppEnv>) => {
    c.header("Content-Security-Policy", consoleCsp(c.req.header("host"), o.rpcUrl));
    c.header("X-Content-Type-Options", "nosniff");
    c.header("X-Frame-Options", "DENY");
    c.header("Referrer-Policy", "same-origin");
  };

  const read = async (file: string) => {
    try {
      return await fs.readFile(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT" || (err as NodeJS.ErrnoException).code === "EISDIR") return undefined;
      throw err;
    }
  };

  const notBuilt = (c: Context<AppEnv>) => {
    const how = "The web console is not built here: run `npm run build -w @cm/console` (npm start builds it by itself), then reload.";
    c.header("Cache-Control", "no-cache");
    if (wantsHtml(c)) {
      return c.html(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Console not built</title></head><body><h1>The web console is not built</h1><p>Run <code>npm run build -w @cm/console</code> in the repository (<code>npm start</code> builds it by itself), then reload this page. The API works without it: see <a href="/docs">/docs</a>.</p></body></html>`,
        404,
      );
    }
    return errorResponse(c, new ApiError("NOT_FOUND", how));
  };

  return new Hono<AppEnv>()
    .get("/", async (c, next) => (wantsHtml(c) ? c.redirect(`${CONSOLE_PATH}/`, 302) : next()))
    .get(CONSOLE_PATH, (c) => c.redirect(`${CONSOLE_PATH}/`, 301))
    .get(`${CONSOLE_PATH}/*`, async (c) => {
      secure(c);
      let relative: string;
      try {
        relative = decodeURIComponent(c.req.path.slice(CONSOLE_PATH.length + 1));
      } catch {
        return errorResponse(c, new ApiError("NOT_FOUND", `no file of the console is at ${c.req.path}`));
      }
      const file = path.resolve(root, relative);
      // Nothing outside the console's folder, however the path is spelt (.., %2e%2e, a NUL).
      if (relative.includes("\0") || (file !== root && !file.startsWith(root + path.sep))) {
        return errorResponse(c, new ApiError("NOT_FOUND", `no file of the console is at ${c.req.path}`));
      }
      const ext = path.extname(file);
      const body = relative && relative !== "index.html" ? await read(file) : undefined;
      if (body && TYPES[ext]) {
        c.header("Content-Type", TYPES[ext]);
        c.header("Cache-Control", relative.startsWith("assets/") ? IMMUTABLE : "no-cache");
        return c.body(body);
      }
      // A missing asset is a 404 (a page of HTML in its place would be misread as script); any other path is one of the SPA's.
      if (ext && ext !== ".html") return errorResponse(c, new ApiError("NOT_FOUND", `no file of the console is at ${c.req.path}`));
      const index = await read(path.join(root, "index.html"));
      if (!index) return notBuilt(c);
      // index.html names this build's assets: asked again each time, so a new build is seen at the next load.
      c.header("Cache-Control", "no-cache");
      return c.html(withChain(index.toString("utf8"), o));
    });
}

/**
 * The page learns the Solana RPC to send a wallet's payment through (the one the CSP lets it
 * reach: the control plane's own, so the payment is read back where it was sent) and the
 * stablecoin's decimals from two meta elements: data, not script, so the CSP stands.
 */
function withChain(html: string, o: { rpcUrl?: string; stableDecimals?: number }): string {
  const metas = [
    o.rpcUrl && `<meta name="cm-solana-rpc" content="${attribute(o.rpcUrl)}" />`,
    o.stableDecimals !== undefined && `<meta name="cm-stable-decimals" content="${o.stableDecimals}" />`,
  ].filter(Boolean);
  return metas.length ? html.replace("</head>", `${metas.join("")}</head>`) : html;
}

const attribute = (text: string) => text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function wantsHtml(c: Context<AppEnv>): boolean {
  return /\btext\/html\b/i.test(c.req.header("accept") ?? "");
}

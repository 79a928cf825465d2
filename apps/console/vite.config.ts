import { defineConfig } from "vite";

/**
 * The console is served by the control plane under /app/ (routes/console.ts), from the
 * API's own origin: every asset URL is absolute under /app/, and assets carry a content
 * hash so the server can let browsers keep them for a year.
 */
export default defineConfig({
  base: "/app/",
  // No React plugin: esbuild's automatic JSX runtime is all the build needs (the plugin only adds fast refresh for `vite dev`).
  esbuild: { jsx: "automatic" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // The index.html must carry no inline script (the CSP says script-src 'self'); a module preload polyfill would be one.
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
  },
  server: {
    // `npm run dev -w @cm/console` against a control plane on its default port.
    proxy: Object.fromEntries(
      ["/auth", "/nodes", "/templates", "/deployments", "/credits", "/operator", "/registry-credentials", "/health"].map((p) => [
        p,
        { target: "http://127.0.0.1:8080", ws: true },
      ]),
    ),
  },
});

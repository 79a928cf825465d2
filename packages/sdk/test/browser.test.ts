import { join } from "node:path";
import { build } from "esbuild";
import { describe, expect, it } from "vitest";

// The SDK runs in browsers: bundled for one, nothing of Node's may be needed.

describe("the SDK in a browser", () => {
  it("bundles for the browser with no Node built-in, and without web3.js or zod in the bundle", async () => {
    const out = await build({
      entryPoints: [join(import.meta.dirname, "../src/index.ts")],
      bundle: true,
      platform: "browser",
      format: "esm",
      write: false,
      metafile: true,
      // Loaded on demand by credits.buy: the app's bundler splits it off.
      external: ["@solana/web3.js"],
      logLevel: "silent",
    });
    const inputs = Object.keys(out.metafile.inputs);
    expect(inputs.filter((i) => i.startsWith("node:") || /^(fs|path|os|crypto|http|net)$/.test(i))).toEqual([]);
    expect(inputs.some((i) => i.includes("/zod/"))).toBe(false);
    expect(out.outputFiles[0]!.text).not.toMatch(/\bprocess\.|\brequire\(/);
  });
});

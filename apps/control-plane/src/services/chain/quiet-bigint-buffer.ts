/**
 * @solana/spl-token reads and writes its u64 amounts through bigint-buffer, which first
 * tries a native addon that an npm install here does not build (its install script needs
 * node-gyp and a compiler) and, failing, prints `bigint: Failed to load bindings, pure JS
 * will be used (try npm run rebuild?)` on every start of the control plane. Its pure-JS
 * fallback gives the same numbers (slower, for the few amounts a payout encodes), and the
 * advice names a script this repository does not have: nothing a user can act on. Loaded
 * here first with that one line held back, it is the module spl-token then finds cached.
 * A bundle has no node_modules to resolve from and needs none of this: scripts/build.ts
 * takes the addon's attempt out at build time.
 */
import { createRequire } from "node:module";

const WARNING = "bigint: Failed to load bindings";

try {
  const fromHere = createRequire(import.meta.url);
  const fromSplToken = createRequire(fromHere.resolve("@solana/spl-token"));
  const fromLayouts = createRequire(fromSplToken.resolve("@solana/buffer-layout-utils"));
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (!(typeof args[0] === "string" && args[0].startsWith(WARNING))) warn(...args);
  };
  try {
    fromLayouts("bigint-buffer");
  } finally {
    console.warn = warn;
  }
} catch {
  // Bundled, or a layout of node_modules this does not know: spl-token loads it as before.
}

#!/usr/bin/env -S npx tsx
import { realpathSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { version } from "../package.json";
import { commandHelp, findCommand, GLOBAL_OPTIONS, parseCommand, UsageError } from "./args";
import { COMMANDS } from "./commands";
import { createOutput, printable } from "./output";

/** Exit codes (as `gh help exit-codes` documents its own): */
export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 130 } as const;

const BY_NAME = new Map(COMMANDS.map((c) => [c.name, c]));

function usage(): string {
  const width = Math.max(...COMMANDS.map((c) => c.name.length)) + 2;
  return [
    "cm: the compute marketplace from a terminal.",
    "",
    "Usage: cm [--api URL] [--keypair PATH] [--rpc URL] [--json] <command> [options]",
    "",
    "Commands:",
    ...COMMANDS.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    "",
    "Global options:",
    ...Object.entries(GLOBAL_OPTIONS).map(([name, o]) => `  --${`${name}${o.value ? ` ${o.value}` : ""}`.padEnd(16)}${o.description}`),
    "  --version         print the version",
    "",
    "Exit codes: 0 ok, 1 the API or the chain said no (error CODE: message), 2 a usage error, 130 interrupted.",
    "Run `cm <command> --help` for a command's options and an example.",
    "",
  ].join("\n");
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const out = createOutput(process.stdout, process.stderr);
  const { words, rest } = findCommand(argv, new Set(BY_NAME.keys()));
  if (words.length === 0) {
    if (rest.includes("--version")) {
      out.line(version);
      return EXIT.ok;
    }
    if (rest.includes("--help") || rest.includes("-h")) {
      process.stdout.write(usage());
      return EXIT.ok;
    }
    process.stderr.write(`error: ${rest.length ? `unknown option ${rest[0]}` : "no command given"}\n\n${usage()}`);
    return EXIT.usage;
  }
  const spec = BY_NAME.get(words.join(" "));
  if (!spec) {
    const near = COMMANDS.filter((c) => c.name.startsWith(`${words[0]} `)).map((c) => `cm ${c.name}`);
    process.stderr.write(`error: unknown command ${words.join(" ")}${near.length ? ` (did you mean ${near.join(", ")}?)` : ""}\n\n${usage()}`);
    return EXIT.usage;
  }

  const abort = new AbortController();
  const onInterrupt = () => abort.abort(new Interrupted());
  process.once("SIGINT", onInterrupt);
  try {
    const parsed = parseCommand(spec, rest);
    if (parsed.flags.help) {
      process.stdout.write(commandHelp(spec));
      return EXIT.ok;
    }
    const run = await spec.load();
    const { createContext } = await import("./context");
    const code = await run(createContext(parsed.flags, env, out, abort.signal), parsed);
    return typeof code === "number" ? code : EXIT.ok;
  } catch (err) {
    return report(err instanceof UsageError && !err.command ? new UsageError(err.message, spec) : err, env.CM_API_KEY);
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

class Interrupted extends Error {}

/** What to run next, after the errors whose fix is a command of cm's own (the SDK's words serve any client, so they cannot name it). */
const HINTS: Record<string, string> = {
  NETWORK_ERROR: " (is the control plane running? --api or CM_API_URL says where)",
  NOT_SIGNED_IN: " with `cm login`",
  SESSION_EXPIRED: " with `cm login`",
  // A protected route refused the session's token: signed out elsewhere, or the session revoked.
  UNAUTHORIZED: " (sign in again with `cm login`)",
};

/** What to do when the API refused the key in CM_API_KEY (the session's hints above are for `cm login`'s session). */
const KEY_HINTS: Record<string, string> = {
  UNAUTHORIZED: ": the key was deleted or never issued; create another with `cm auth keys create`, or unset CM_API_KEY to use your `cm login` session",
  API_KEY_EXPIRED: ": create another with `cm auth keys create`",
  INSUFFICIENT_SCOPE:
    ": give a key the scope it names (`cm auth keys create --scope ...`), or unset CM_API_KEY to use your `cm login` session (API keys are managed only from one)",
};

/** On a 401 or 403, which credential cm sent: the key in CM_API_KEY (by its shown prefix) or the session `cm login` saved. */
function credentialNote(code: string, apiKey: string | undefined): string {
  if (apiKey) return ` (cm sent the API key in CM_API_KEY, ${apiKey.slice(0, 12)}…${KEY_HINTS[code] ?? ""})`;
  const hint = (HINTS[code] ?? "").replace(/^ \((.*)\)$/, "$1");
  return ` (cm sent the session \`cm login\` saved${hint ? `: ${hint}` : ""})`;
}

function report(err: unknown, apiKey?: string): number {
  if (err instanceof UsageError) {
    process.stderr.write(`error: ${err.message}\n\n${err.command ? commandHelp(err.command) : usage()}`);
    return EXIT.usage;
  }
  if (err instanceof Interrupted || (err as { name?: string })?.name === "AbortError") return EXIT.interrupted;
  const code = (err as { code?: unknown })?.code;
  // Our errors (the SDK's and the keypair's) carry a code and a message meant for people: no stack.
  if (err instanceof Error && typeof code === "string" && /^[A-Z][A-Z0-9_]*$/.test(code)) {
    const requestId = (err as { requestId?: string }).requestId;
    const status = (err as { status?: unknown }).status;
    const hint = status === 401 || status === 403 ? credentialNote(code, apiKey) : (HINTS[code] ?? "");
    // The message may carry a deployment's reason, which a node's agent wrote: escaped like all output.
    process.stderr.write(`error ${code}: ${printable(err.message)}${hint}${requestId && process.env.CM_DEBUG ? ` (request ${requestId})` : ""}\n`);
    return EXIT.failed;
  }
  const text = err instanceof Error ? ((process.env.CM_DEBUG ? err.stack : err.message) ?? "") : String(err);
  process.stderr.write(`error INTERNAL: ${text.split("\n").map(printable).join("\n")}\n`);
  return EXIT.failed;
}

/** Run as a program, also through a link to it (npm install -g links bin/cm to the file). */
const isEntryPoint = (script: string | undefined) => {
  try {
    return script !== undefined && import.meta.url === pathToFileURL(realpathSync(script)).href;
  } catch {
    return false;
  }
};

if (isEntryPoint(process.argv[1])) {
  // `npm run cm` starts cm in the repository's root, wherever it was typed: the paths a user gives
  // (cm cp ./results, keygen --outfile) are theirs, from the folder they ran it in (npm's INIT_CWD).
  if (process.env.npm_lifecycle_event === "cm" && process.env.INIT_CWD) {
    try {
      process.chdir(process.env.INIT_CWD);
    } catch {
      // That folder is gone: relative paths stay the repository's, as before.
    }
  }
  process.exitCode = await main(process.argv.slice(2));
}

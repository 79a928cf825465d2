import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { needs } from "@cm/testkit";
import { runProgram } from "@cm/testkit/run-program";
import { describe, expect, it } from "vitest";
import { UsageError as AgentUsageError, parseArgs as parseAgentArgs } from "../../agent/src/cli/args";
import { CONFIG_KEYS as AGENT_CONFIG_KEYS, NODE_KEYS as AGENT_NODE_KEYS, configFromRaw, mergeConfigSources } from "../../agent/src/config";
import { ensureScriptImage } from "../../agent/test/support/script-image";
import { TEMPLATE_SEED } from "../../control-plane/src/catalog/templates";
import { ConfigSchema as ControlPlaneConfig } from "../../control-plane/src/config";
import { findCommand, parseCommand, UsageError } from "../src/args";
import { COMMANDS } from "../src/commands";
import { terminal } from "./support/cli";

// The commands the README and the guides show, run as written wherever they can run here,
// so the docs cannot drift from the code again: every cm command parses, every template
// slug exists, every npm script exists, every environment variable is read by the program
// the docs say reads it, the agent's and the installer's command lines parse and give the
// agent what it needs, the installer's --help prints its usage, and the command that
// cleans up after `npm start` removes the local node's containers.

const ROOT = resolve(import.meta.dirname, "../../..");
const DOCS = ["README.md", "apps/agent/README.md", "apps/cli/README.md", "packages/sdk/README.md"];
const text = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** Shell-ish lines: each line of a code block (with its `\` continuations) and each inline code span. */
function snippets(markdown: string): Array<{ code: string; block: boolean }> {
  const out: Array<{ code: string; block: boolean }> = [];
  const lines = markdown.split("\n");
  let fence: string | undefined;
  let prose = "";
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const opens = /^\s*```(\w*)/.exec(line);
    if (opens) {
      fence = fence === undefined ? opens[1] || "sh" : undefined;
      continue;
    }
    const indented = fence === undefined && /^ {4}\S/.test(line) && (i === 0 || lines[i - 1]!.trim() === "" || /^ {4}/.test(lines[i - 1]!));
    if ((fence !== undefined && /^(sh|bash|shell)$/.test(fence)) || indented) {
      let code = line.trim();
      while (code.endsWith("\\") && i + 1 < lines.length) code = `${code.slice(0, -1)} ${lines[++i]!.trim()}`;
      out.push({ code, block: true });
    } else if (fence === undefined) prose += `${line}\n`;
    else out.push({ code: line, block: true }); // a ts block: only its strings are looked at
  }
  // A table cell escapes its pipes: `a \| b`.
  for (const m of prose.matchAll(/`([^`\n]+)`/g)) out.push({ code: m[1]!.replace(/\\\|/g, "|"), block: false });
  return out;
}

/** Words as a POSIX shell splits them (quotes and backslashes), enough for the docs' commands. */
function words(command: string): string[] {
  const out: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (c === "'") {
      const end = command.indexOf("'", i + 1);
      word = (word ?? "") + command.slice(i + 1, end < 0 ? undefined : end);
      i = end < 0 ? command.length : end;
    } else if (c === '"') {
      let j = i + 1;
      let value = "";
      for (; j < command.length && command[j] !== '"'; j++) value += command[j] === "\\" ? command[++j] : command[j];
      word = (word ?? "") + value;
      i = j;
    } else if (/\s/.test(c)) {
      if (word !== undefined) out.push(word);
      word = undefined;
    } else word = (word ?? "") + c;
  }
  if (word !== undefined) out.push(word);
  return out;
}

/** `block`: a line of a code block, which must run as written; else an inline span in prose, which may leave out arguments. */
type Invocation = { doc: string; source: string; block: boolean; env: Record<string, string>; program: string; args: string[] };

/** Each simple command in a snippet: `a && b | c # note` is a, b and c; NAME=value prefixes and sudo set aside. */
function invocations(doc: string, code: string, block: boolean): Invocation[] {
  const out: Invocation[] = [];
  for (const part of code.replace(/\s#\s.*$/, "").split(/&&|\|\||;|(?<!\\)\|(?![^(]*\))/)) {
    let w = words(part.trim());
    const env: Record<string, string> = {};
    for (;;) {
      const assign = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(w[0] ?? "");
      if (assign) {
        env[assign[1]!] = assign[2]!;
        w = w.slice(1);
      } else if (w[0] === "sudo" || w[0] === "env") {
        w = w.slice(1);
        while (w[0]?.startsWith("-")) w = w.slice(1);
      } else break;
    }
    if (w[0] === "npm" && w[1] === "run") {
      const rest = w.slice(2).filter((x) => x !== "--silent");
      const [script = "", ...after] = rest;
      out.push({ doc, source: code, block, env, program: `npm run ${script}`, args: after[0] === "--" ? after.slice(1) : after });
    } else if (w.length) out.push({ doc, source: code, block, env, program: w[0]!, args: w.slice(1) });
  }
  return out;
}

/** Backquoted names in the columns of a document's tables headed "variable", "environment" or "where it is looked for". */
function tableVariables(markdown: string): Set<string> {
  const named = new Set<string>();
  let column = -1;
  for (const row of markdown.split("\n")) {
    if (!row.startsWith("|")) {
      column = -1;
      continue;
    }
    const cells = row.split(/(?<!\\)\|/).slice(1, -1);
    const header = cells.findIndex((c) => /^\s*(variable|environment|where it is looked for)/i.test(c));
    if (header >= 0) column = header;
    else if (/^\|[-| ]+\|$/.test(row)) continue;
    else if (column >= 0) for (const m of (cells[column] ?? "").matchAll(/`([A-Z][A-Z0-9_]+)`/g)) named.add(m[1]!);
  }
  return named;
}

const all = DOCS.flatMap((doc) => snippets(text(doc)).flatMap(({ code, block }) => invocations(doc, code, block)));
const cmExamples = COMMANDS.flatMap((c) => c.examples.flatMap((e) => invocations(`cm ${c.name} --help`, e, true)));
const cmCalls = [...all, ...cmExamples].filter((i) => i.program === "cm" || i.program === "npm run cm");
const BY_NAME = new Map(COMMANDS.map((c) => [c.name, c]));
/** Usage syntax, not a command line: `cm logs ID [-f] [--tail N]`, `(--template T | --image I)`. */
const isUsage = (args: string[]) => args.some((a) => /[[\](){}]|\.\.\.$|^[|]$/.test(a));

describe("the docs' commands", () => {
  it("finds the commands the docs show (the extraction itself works)", () => {
    expect(cmCalls.length).toBeGreaterThan(20);
    expect(all.filter((i) => i.program === "npm run agent").length).toBeGreaterThan(5);
    expect(all.some((i) => i.program.endsWith("install-agent.sh"))).toBe(true);
  });

  it("every cm command they name exists, and every option they give it is one it takes", () => {
    const problems: string[] = [];
    for (const call of cmCalls) {
      const { words: names, rest } = findCommand(call.args, new Set(BY_NAME.keys()));
      if (names.length === 0 && rest.every((r) => ["--help", "-h", "--version"].includes(r))) continue;
      if (names[0]?.startsWith("<")) continue; // `cm <command> --help`
      const spec = BY_NAME.get(names.join(" "));
      if (!spec) {
        problems.push(`${call.doc}: \`${call.source}\`: no command ${names.join(" ")}`);
        continue;
      }
      // A command named in prose (`cm exec`), not a command line.
      if (rest.length === 0 && !call.source.includes(" -- ")) continue;
      const options = new Set(["--help", "-h", ...Object.keys(spec.options ?? {}).map((o) => `--${o}`), "--api", "--keypair", "--rpc", "--json"]);
      for (const o of Object.values(spec.options ?? {})) if (o.short) options.add(`-${o.short}`);
      const shorts = Object.values(spec.options ?? {}).flatMap((o) => (o.short ? [o.short] : []));
      if (isUsage(rest)) {
        for (const flag of rest.flatMap((r) => r.match(/--?[a-z][a-z-]*/g) ?? []))
          if (!options.has(flag) && !/^-[a-z]+$/.test(flag)) problems.push(`${call.doc}: \`${call.source}\`: ${spec.name} takes no ${flag}`);
        continue;
      }
      // Combined short switches (-it) as parseArgs reads them.
      const bad = rest.filter((r) => /^-[a-z]{2,}$/.test(r) && ![...r.slice(1)].every((s) => shorts.includes(s)));
      if (bad.length) problems.push(`${call.doc}: \`${call.source}\`: ${bad.join(" ")}`);
      try {
        parseCommand(spec, rest.slice(0, rest.includes("--") ? rest.indexOf("--") + 2 : rest.length));
      } catch (err) {
        // Prose may name `cm logs -f` without its ID; a code block's line must be complete.
        if (err instanceof UsageError && (call.block || !err.message.startsWith("missing "))) problems.push(`${call.doc}: \`${call.source}\`: ${err.message}`);
        else if (!(err instanceof UsageError)) throw err;
      }
    }
    expect(problems).toEqual([]);
  });

  it("`cm <command> --help` answers for every command the docs name, with its usage", async () => {
    const named = new Set<string>();
    for (const call of cmCalls) {
      const { words: names } = findCommand(call.args, new Set(BY_NAME.keys()));
      if (BY_NAME.has(names.join(" "))) named.add(names.join(" "));
    }
    expect(named.size).toBeGreaterThan(10);
    const t = terminal();
    try {
      for (const name of named) {
        const r = await t.cm([...name.split(" "), "--help"]);
        expect(r, name).toMatchObject({ code: 0, stderr: "" });
        expect(r.stdout).toContain(`Usage: cm ${name}`);
      }
    } finally {
      t.close();
    }
  }, 120_000);

  it("every template they name is in the catalogue", () => {
    const slugs = new Set(TEMPLATE_SEED.flatMap((t) => [t.slug, t.id]));
    const named = new Set<string>();
    for (const call of cmCalls) {
      const at = call.args.indexOf("--template");
      if (at >= 0 && !/^[A-Z_]+$/.test(call.args[at + 1] ?? "")) named.add(call.args[at + 1]!);
      const show = call.args.indexOf("templates");
      if (show >= 0 && call.args[show + 1] === "show" && /^[a-z]/.test(call.args[show + 2] ?? "")) named.add(call.args[show + 2]!);
    }
    for (const doc of DOCS) for (const m of text(doc).matchAll(/(?:templates\.get\(|templateId: )"([^"]+)"/g)) named.add(m[1]!);
    expect(named.size).toBeGreaterThan(0);
    expect([...named].filter((s) => !slugs.has(s))).toEqual([]);
  });

  it("every npm script they run exists", () => {
    const scripts = Object.keys(JSON.parse(text("package.json")).scripts);
    const run = new Set(all.filter((i) => i.program.startsWith("npm run ")).map((i) => i.program.slice("npm run ".length)));
    expect(run.size).toBeGreaterThan(3);
    expect([...run].filter((s) => !scripts.includes(s))).toEqual([]);
    for (const doc of DOCS) for (const m of text(doc).matchAll(/\bnpm (test|start)\b/g)) expect(scripts).toContain(m[1]);
  });

  it("every environment variable they name is read by the program they name it for", () => {
    const readers: Record<string, string> = {
      // release.ts: the cm-admin wrapper's CM_CONTROL_PLANE_ENV.
      "the control plane": ["apps/control-plane/src/config.ts", "apps/control-plane/src/database-location.ts", "scripts/release/release.ts"]
        .map(text)
        .join("\n"),
      "the agent": `${text("apps/agent/src/config.ts")}\nAGENT_CONFIG`,
      cm: ["apps/cli/src/context.ts", "apps/cli/src/index.ts", "apps/cli/src/session-file.ts"].map(text).join("\n"),
      "the tests": ["packages/testkit/src/pieces.ts", "packages/testkit/src/databases.ts", "packages/testkit/src/needs.ts"].map(text).join("\n"),
    };
    // Read by other programs, as the docs say: Node, the template's image, the shell.
    const elsewhere = new Set(["NODE_EXTRA_CA_CERTS", "JUPYTER_TOKEN", "TOKEN", "CI", "HOME", "PATH", "NO_COLOR"]);
    const named = new Set<string>();
    for (const doc of DOCS) {
      const markdown = text(doc);
      for (const name of tableVariables(markdown)) named.add(name);
      // "env `NAME`" and NAME=value in the commands.
      for (const m of markdown.matchAll(/\benv `([A-Z][A-Z0-9_]+)`/g)) named.add(m[1]!);
    }
    for (const call of all) for (const name of Object.keys(call.env)) named.add(name);
    expect(named.size).toBeGreaterThan(20);
    const unread = [...named].filter((n) => !elsewhere.has(n) && !Object.values(readers).some((source) => new RegExp(`\\b${n}\\b`).test(source)));
    expect(unread).toEqual([]);
  });

  it("every environment variable a program reads is in its guide's configuration table", () => {
    // What the code reads by name: process.env.X, env.X, env["X"], and a shell's ${X:-...} in the
    // release's wrappers; then the keys read through a schema that parses the environment whole.
    const readIn = (...dirs: string[]) =>
      dirs.flatMap((dir) =>
        readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
          .filter((f) => f.endsWith(".ts"))
          // Comments name variables without reading them.
          .map((f) => text(join(dir, f)).replace(/^\s*(\/\/|\/?\*).*$/gm, ""))
          .flatMap((code) => [...code.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]*)\b|\[["']([A-Z][A-Z0-9_]*)["']\])|\$\{([A-Z][A-Z0-9_]*):-/g)])
          .map((m) => m[1] ?? m[2] ?? m[3]!),
      );
    const programs = [
      {
        name: "the control plane and cm-admin",
        reads: [...readIn("apps/control-plane/src", "scripts/release"), ...Object.keys(ControlPlaneConfig.shape)],
        guide: "README.md",
      },
      { name: "the agent", reads: [...readIn("apps/agent/src"), ...AGENT_CONFIG_KEYS, ...AGENT_NODE_KEYS], guide: "apps/agent/README.md" },
      { name: "cm", reads: readIn("apps/cli/src"), guide: "apps/cli/README.md" },
      // The test pieces' table ("where it is looked for").
      { name: "the tests' pieces", reads: readIn("packages/testkit/src", "packages/db/src", "packages/sdk/src", "packages/protocol/src"), guide: "README.md" },
    ];
    // Read, and documented elsewhere or not settings at all:
    const NOT_SETTINGS = new Set([
      "PATH", // inherited: where programs are found
      "HOME", // inherited
      "INIT_CWD", // npm's, for `npm run cm` (the folder it was typed in)
      "CI", // the test runner's: README's "Test" says what CI=true does
    ]);
    const missing = programs.flatMap(({ name, reads, guide }) => {
      const documented = tableVariables(text(guide));
      return [...new Set(reads)].filter((v) => !NOT_SETTINGS.has(v) && !documented.has(v)).map((v) => `${v} (read by ${name}, not in ${guide}'s tables)`);
    });
    expect(programs.every((p) => p.reads.length > 0)).toBe(true);
    expect(missing).toEqual([]);
  });

  it("the agent's command lines parse and, as written, give it what it needs to start", () => {
    const problems: string[] = [];
    // A config file or a token file the command names, as the operator would have it.
    const readFile = (path: string) => (/token/.test(path) ? "cmn_doc\n" : "CONTROL_PLANE_URL=https://cp.example.com\nAGENT_TOKEN=cmn_doc\n");
    const agentCalls = all.filter((i) => i.program === "npm run agent" || i.program.endsWith("install-agent.sh"));
    for (const call of agentCalls) {
      const installer = call.program.endsWith("install-agent.sh");
      if (installer && call.args.some((a) => a === "--help" || a === "-h")) continue;
      if (!installer && isUsage(call.args)) continue;
      // The installer hands its options to `install`.
      const argv = installer ? ["install", ...call.args] : call.args;
      try {
        const parsed = parseAgentArgs(argv);
        if (!["run", "doctor", "install"].includes(parsed.command)) continue;
        // Placeholders stand for real values: <agentToken>, TOKEN, URL.
        const flags = Object.fromEntries(Object.entries(parsed.config).map(([k, v]) => [k, v === "URL" ? "https://cp.example.com" : v]));
        const env = Object.fromEntries(Object.entries(call.env).map(([k, v]) => [k, v === "URL" ? "https://cp.example.com" : v]));
        configFromRaw(mergeConfigSources({ flags, env, configPath: parsed.configPath, readFile }));
      } catch (err) {
        if (err instanceof AgentUsageError || (err as Error).name === "ConfigError")
          problems.push(`${call.doc}: \`${call.source}\`: ${(err as Error).message}`);
        else throw err;
      }
    }
    expect(agentCalls.length).toBeGreaterThan(5);
    expect(problems).toEqual([]);
    // Every key the agent's config reads is in its guide.
    const guide = text("apps/agent/README.md");
    expect(AGENT_CONFIG_KEYS.filter((k) => !guide.includes(`\`${k}\``))).toEqual([]);
  });

  it("scripts/install-agent.sh --help prints its usage and exits 0, checking nothing", () => {
    for (const flag of ["--help", "-h"]) {
      const r = spawnSync("bash", [join(ROOT, "scripts/install-agent.sh"), "--control-plane", "https://cp.example.com", flag], {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "" },
      });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^Usage: scripts\/install-agent\.sh /);
      expect(r.stdout).toContain("--token-file PATH");
      expect(r.stdout).not.toMatch(/✓|✗/);
      expect(r.stderr).toBe("");
    }
  });
});

needs("docker", "busybox").describe("the README's cleanup after npm start", () => {
  it("removes the local node's containers and networks, and nothing else", async () => {
    const readme = text("README.md");
    const start = readme.indexOf("    node=$(node -p 'require(\"./data/local-node.json\").nodeId')");
    expect(start).toBeGreaterThan(0);
    const script = readme
      .slice(start)
      .split("\n")
      .filter((l, i, ls) => l.startsWith("    ") && ls.slice(0, i).every((p) => p.startsWith("    ")))
      .map((l) => l.slice(4))
      .join("\n");
    // A checkout of its own: the data directory npm start would have written, for a node of this test.
    const dir = mkdtempSync(join(tmpdir(), "cm-docs-cleanup-"));
    const nodeId = `node_docs${process.pid}`;
    mkdirSync(join(dir, "data"));
    writeFileSync(join(dir, "data/local-node.json"), JSON.stringify({ nodeId, token: "cmn_x" }));
    const image = ensureScriptImage();
    const docker = async (...args: string[]) => (await runProgram("docker", args)).trim();
    const network = await docker("network", "create", "--label", `cm.node-id=${nodeId}`, `cm-docs-${process.pid}`);
    const mine = await docker("run", "-d", "--label", `cm.node-id=${nodeId}`, "--network", network, "--env", "SCRIPT=sleep 600", image);
    const other = await docker("run", "-d", "--label", "cm.node-id=node_someone_else", "--env", "SCRIPT=sleep 600", image);
    try {
      await runProgram("sh", ["-c", script], { cwd: dir });
      expect(await docker("ps", "-aq", "--no-trunc", "--filter", `label=cm.node-id=${nodeId}`)).toBe("");
      expect(await docker("network", "ls", "-q", "--filter", `label=cm.node-id=${nodeId}`)).toBe("");
      expect(await docker("ps", "-q", "--no-trunc", "--filter", `id=${other}`)).toBe(other);
    } finally {
      await runProgram("docker", ["rm", "-f", mine, other]).catch(() => undefined);
      await runProgram("docker", ["network", "rm", network]).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

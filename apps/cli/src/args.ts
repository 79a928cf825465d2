import { parseArgs } from "node:util";

/** A wrong command line: exit 2, with the command's usage. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: CommandSpec,
  ) {
    super(message);
  }
}

export type Option = { type: "string" | "boolean"; short?: string; multiple?: boolean; value?: string; description: string };
export type Options = Record<string, Option>;

export interface CommandSpec {
  /** The words that name it: "nodes show". */
  name: string;
  summary: string;
  /** After `cm <name>`: "ID [--tail N]". */
  usage: string;
  /** The positionals' names, "?" marking optional ones and "..." a last one that takes the rest ("...?" the rest, if any): ["ID"]. */
  args?: string[];
  options?: Options;
  examples: string[];
  /** Loaded when run, so that `cm --version` loads nothing of it. */
  load: () => Promise<Run>;
}

export type Parsed = { args: string[]; flags: Record<string, string | boolean | string[] | undefined> };
/** A number is the exit code (cm exec passes on its command's); otherwise 0. */
// biome-ignore lint/suspicious/noConfusingVoidType: most commands return nothing, and say so with void
export type Run = (ctx: import("./context").Context, parsed: Parsed) => Promise<void | number>;

export const GLOBAL_OPTIONS: Options = {
  api: { type: "string", value: "URL", description: "the control plane (env CM_API_URL, default http://127.0.0.1:8080)" },
  keypair: { type: "string", value: "PATH", description: "Solana keypair file (env CM_KEYPAIR, default ~/.config/solana/id.json)" },
  rpc: { type: "string", value: "URL", description: "Solana JSON-RPC for payments (env SOLANA_RPC_URL)" },
  json: { type: "boolean", description: "print the API's JSON on stdout, nothing else" },
  help: { type: "boolean", short: "h", description: "show help" },
};

const GLOBAL_WITH_VALUE = new Set(
  Object.entries(GLOBAL_OPTIONS)
    .filter(([, o]) => o.type === "string")
    .map(([name]) => `--${name}`),
);

/** Splits `argv` into the command's words and the rest: global options may come before the command. */
export function findCommand(argv: string[], names: Set<string>): { words: string[]; rest: string[] } {
  const rest: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const token = argv[i]!;
    if (!token.startsWith("-") || token === "-" || token === "--") break;
    rest.push(token);
    if (GLOBAL_WITH_VALUE.has(token) && i + 1 < argv.length) rest.push(argv[++i]!);
  }
  if (i >= argv.length || argv[i] === "--") return { words: [], rest: [...rest, ...argv.slice(i)] };
  // The longest name that matches: `auth keys create` before `auth keys`, `nodes show` before `nodes`.
  for (let n = 3; n > 1; n--) {
    const words = argv.slice(i, i + n);
    if (words.length === n && names.has(words.join(" "))) return { words, rest: [...rest, ...argv.slice(i + n)] };
  }
  return { words: [argv[i]!], rest: [...rest, ...argv.slice(i + 1)] };
}

/** Parses the command's options and positionals strictly: anything unknown is a UsageError. */
export function parseCommand(spec: CommandSpec, argv: string[]): Parsed {
  const options = Object.fromEntries(
    Object.entries({ ...GLOBAL_OPTIONS, ...spec.options }).map(([name, o]) => [
      name,
      { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple ? { multiple: true } : {}) },
    ]),
  );
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError((err as Error).message.replace(/\. To specify a positional argument.*$/s, ""), spec);
  }
  const names = spec.args ?? [];
  const required = names.filter((n) => !n.endsWith("?")).length;
  if (!parsed.values.help) {
    if (parsed.positionals.length < required)
      throw new UsageError(
        `missing ${names
          .slice(parsed.positionals.length)
          .filter((n) => !n.endsWith("?"))
          .join(" ")}`,
        spec,
      );
    if (parsed.positionals.length > names.length && !/\.\.\.\??$/.test(names.at(-1) ?? ""))
      throw new UsageError(`unexpected argument: ${parsed.positionals[names.length]}`, spec);
  }
  return { args: parsed.positionals, flags: parsed.values as Parsed["flags"] };
}

/** The help of one command: usage, options, examples. */
export function commandHelp(spec: CommandSpec): string {
  const lines = [`${spec.summary}`, "", `Usage: cm ${spec.name}${spec.usage ? ` ${spec.usage}` : ""}`];
  if (spec.options && Object.keys(spec.options).length) lines.push("", "Options:", ...optionLines(spec.options));
  lines.push(
    "",
    "Global options:",
    ...optionLines(GLOBAL_OPTIONS),
    "",
    spec.examples.length > 1 ? "Examples:" : "Example:",
    ...spec.examples.map((e) => `  $ ${e}`),
  );
  return `${lines.join("\n")}\n`;
}

function optionLines(options: Options): string[] {
  const left = Object.entries(options).map(
    ([name, o]) => `${o.short ? `-${o.short}, ` : "    "}--${name}${o.value ? ` ${o.value}` : ""}${o.multiple ? "..." : ""}`,
  );
  const width = Math.max(...left.map((l) => l.length)) + 2;
  return Object.values(options).map((o, i) => `  ${left[i]!.padEnd(width)}${o.description}`);
}

/** A whole number from an option, or a UsageError naming it. */
export function intFlag(flags: Parsed["flags"], name: string, spec?: CommandSpec): number | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !/^\d+$/.test(value)) throw new UsageError(`--${name} takes a whole number, not ${JSON.stringify(value)}`, spec);
  return Number(value);
}

/** A number (a fraction allowed) from an option, or a UsageError naming it. */
export function numberFlag(flags: Parsed["flags"], name: string, spec?: CommandSpec): number | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !/^\d+(\.\d+)?$/.test(value)) throw new UsageError(`--${name} takes a number, not ${JSON.stringify(value)}`, spec);
  return Number(value);
}

export const str = (flags: Parsed["flags"], name: string): string | undefined => (typeof flags[name] === "string" ? (flags[name] as string) : undefined);
export const list = (flags: Parsed["flags"], name: string): string[] => (Array.isArray(flags[name]) ? (flags[name] as string[]) : []);

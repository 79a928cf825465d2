import { CONTROL_CHARACTERS, escapeControlCharacters } from "@cm/protocol/control-characters";

/**
 * Where a command writes: data on stdout, everything else on stderr (clig.dev, gh).
 * Every human line passes through `printable`, on a terminal and piped alike: node names,
 * the hardware an agent reports and deployment reasons are other people's strings, and one
 * carrying ESC, a C1 CSI or a bidi override would retitle the window, write the clipboard
 * (OSC 52), plant a link (OSC 8) or forge lines. `--json` keeps every value exact.
 */
export interface Output {
  /** A line of data. */
  line(text: string): void;
  /** Progress or a message for the person at the terminal. */
  note(text: string): void;
  /** The API's JSON, as it came. */
  json(value: unknown): void;
  /** One JSON value on one line (a stream of them: logs -f --json). */
  jsonLine(value: unknown): void;
  /** Rows: aligned columns with a header on a terminal, tab-separated lines without one when piped. */
  table(header: string[], rows: Array<Array<string | number>>): void;
  /** Label and value pairs, aligned. */
  fields(pairs: Array<[string, string | number | undefined | null]>): void;
}

/** Shows each control character as its escape (`\x1b`), so a string can only be read, never act on the terminal. */
export const printable = escapeControlCharacters;

// JSON.stringify escapes C0 in strings but leaves DEL, C1 and the bidi controls raw; as \uXXXX they
// read back the same. The only control character outside strings is the indentation's newline.
const CONTROL = new RegExp(`[${CONTROL_CHARACTERS}]`, "g");
/** JSON whose strings parse back exactly, with no character a terminal would act on. */
export const jsonText = (value: unknown, indent?: number) =>
  JSON.stringify(value, null, indent).replace(CONTROL, (c) => (c === "\n" ? c : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`));

const quietOnBrokenPipe = new WeakSet<NodeJS.WriteStream>();
/**
 * `cm ls | head -1`: the reader has gone, so nothing more anyone reads can be written, and that is
 * the reader's choice, not a failure. Node ignores SIGPIPE and reports EPIPE as an `error` event,
 * which unhandled became a stack trace and exit 1; here it ends cm at once, quietly, with 0.
 */
function exitQuietlyOnBrokenPipe(stream: NodeJS.WriteStream) {
  if (quietOnBrokenPipe.has(stream)) return;
  quietOnBrokenPipe.add(stream);
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(0);
    throw err;
  });
}

export function createOutput(stdout: NodeJS.WriteStream, stderr: NodeJS.WriteStream): Output {
  exitQuietlyOnBrokenPipe(stdout);
  exitQuietlyOnBrokenPipe(stderr);
  const emit = (s: string) => stdout.write(`${s}\n`);
  const write = (s: string) => emit(printable(s));
  return {
    line: write,
    note: (s) => stderr.write(`${printable(s)}\n`),
    json: (value) => emit(jsonText(value, 2)),
    jsonLine: (value) => emit(jsonText(value)),
    table(header, rows) {
      const cells = rows.map((r) => r.map((c) => printable(String(c))));
      if (!stdout.isTTY) {
        for (const r of cells) emit(r.join("\t"));
        return;
      }
      const all = [header, ...cells];
      const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
      for (const r of all)
        emit(
          r
            .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
            .join("  ")
            .trimEnd(),
        );
    },
    fields(pairs) {
      const shown = pairs.filter(([, v]) => v !== undefined && v !== null && v !== "");
      const width = Math.max(...shown.map(([k]) => k.length)) + 2;
      for (const [k, v] of shown) write(`${`${k}:`.padEnd(width)}${v}`);
    },
  };
}

/** Where a command writes: data on stdout, everything else on stderr (clig.dev, gh). */
export interface Output {
  /** A line of data. */
  line(text: string): void;
  /** Progress or a message for the person at the terminal. */
  note(text: string): void;
  /** The API's JSON, as it came. */
  json(value: unknown): void;
  /** Rows: aligned columns with a header on a terminal, tab-separated lines without one when piped. */
  table(header: string[], rows: Array<Array<string | number>>): void;
  /** Label and value pairs, aligned. */
  fields(pairs: Array<[string, string | number | undefined | null]>): void;
}

export function createOutput(stdout: NodeJS.WriteStream, stderr: NodeJS.WriteStream): Output {
  const write = (s: string) => stdout.write(`${s}\n`);
  return {
    line: write,
    note: (s) => stderr.write(`${s}\n`),
    json: (value) => write(JSON.stringify(value, null, 2)),
    table(header, rows) {
      const cells = rows.map((r) => r.map((c) => String(c)));
      if (!stdout.isTTY) {
        for (const r of cells) write(r.join("\t"));
        return;
      }
      const all = [header, ...cells];
      const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
      for (const r of all)
        write(
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

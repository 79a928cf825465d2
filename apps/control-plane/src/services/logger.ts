export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
export type Logger = Record<Exclude<LogLevel, "silent">, (msg: string, fields?: Record<string, unknown>) => void>;

const order: LogLevel[] = ["debug", "info", "warn", "error", "silent"];

/** JSON lines on stderr: readable by people, parseable by a log shipper. */
export function createLogger(level: LogLevel, name = "control-plane"): Logger {
  const min = order.indexOf(level);
  const at = (l: Exclude<LogLevel, "silent">) => (msg: string, fields?: Record<string, unknown>) => {
    if (order.indexOf(l) < min) return;
    process.stderr.write(JSON.stringify({ t: new Date().toISOString(), level: l, name, msg, ...fields }) + "\n");
  };
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

// One line per event on stderr, which systemd's journal keeps: the operator reads
// these, so messages are sentences and context is compact JSON after them
// (`<ISO time> LEVEL message {context}`). pino does the levels, child bindings
// and error serialization; a destination renders each of its records as that line.
import { type LogFields, type Logger, pinoLogger } from "@cm/log";
import type { LogLevel } from "./config";

export type { Logger } from "@cm/log";
export { silentLogger } from "@cm/log";
export type LogContext = LogFields;

export interface LoggerOptions {
  level: LogLevel;
  write?: (line: string) => void;
  now?: () => Date;
}

/** An Error under `err` is written with its stack; one under any other key (`error`) as its message, for the operator. */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const now = options.now ?? (() => new Date());
  return pinoLogger(
    { level: options.level, timestamp: () => `,"time":${JSON.stringify(now().toISOString())}` },
    { write: (record: string) => write(toLine(record)) },
  );
}

/** pino's JSON record as the journal line. */
function toLine(record: string): string {
  const { level, time, msg, ...context } = JSON.parse(record) as LogContext;
  const extra = Object.keys(context).length > 0 ? ` ${JSON.stringify(context)}` : "";
  return `${String(time)} ${String(level).toUpperCase().padEnd(5)} ${String(msg)}${extra}`;
}

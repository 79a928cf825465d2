// One line per event on stderr, which systemd's journal keeps: the operator reads
// these, so messages are sentences and context is compact JSON after them
// (`<ISO time> LEVEL message {context}`). pino does the levels, child bindings
// and error serialization; a destination renders each of its records as that line.
import pino from "pino";
import type { LogLevel } from "./config";

export type LogContext = Record<string, unknown>;

export interface Logger {
  debug(message: string, context?: LogContext): void;
  info(message: string, context?: LogContext): void;
  warn(message: string, context?: LogContext): void;
  error(message: string, context?: LogContext): void;
  /** A logger whose every line carries `context` too (a deployment, a container). */
  child(context: LogContext): Logger;
}

export interface LoggerOptions {
  level: LogLevel;
  write?: (line: string) => void;
  now?: () => Date;
}

/** An Error under `err` is written with its stack; one under any other key (`error`) as its message, for the operator. */
export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const now = options.now ?? (() => new Date());
  return wrap(
    pino(
      {
        level: options.level,
        base: undefined,
        timestamp: () => `,"time":${JSON.stringify(now().toISOString())}`,
        formatters: { level: (label) => ({ level: label }), log: errorsAsMessages },
      },
      { write: (record: string) => write(toLine(record)) },
    ),
  );
}

function wrap(p: pino.Logger): Logger {
  return {
    debug: (message, context) => p.debug(context ?? {}, message),
    info: (message, context) => p.info(context ?? {}, message),
    warn: (message, context) => p.warn(context ?? {}, message),
    error: (message, context) => p.error(context ?? {}, message),
    child: (context) => wrap(p.child(context)),
  };
}

function errorsAsMessages(context: LogContext): LogContext {
  let out = context;
  for (const [key, value] of Object.entries(context)) {
    if (key !== "err" && value instanceof Error) {
      if (out === context) out = { ...context };
      out[key] = value.message;
    }
  }
  return out;
}

/** pino's JSON record as the journal line. */
function toLine(record: string): string {
  const { level, time, msg, ...context } = JSON.parse(record) as LogContext;
  const extra = Object.keys(context).length > 0 ? ` ${JSON.stringify(context)}` : "";
  return `${String(time)} ${String(level).toUpperCase().padEnd(5)} ${String(msg)}${extra}`;
}

const noop = () => {};
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop, child: () => silentLogger };

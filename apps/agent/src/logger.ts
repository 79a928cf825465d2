// One line per event on stderr, which systemd's journal keeps: the operator reads
// these, so messages are sentences and context is compact JSON after them.
import type { LogLevel } from "./config";

export interface Logger {
  debug(message: string, context?: Record<string, unknown>): void;
  info(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export interface LoggerOptions {
  level: LogLevel;
  write?: (line: string) => void;
  now?: () => Date;
}

export function createLogger(options: LoggerOptions): Logger {
  const write = options.write ?? ((line: string) => process.stderr.write(`${line}\n`));
  const now = options.now ?? (() => new Date());
  const emit = (level: Exclude<LogLevel, "silent">) => (message: string, context?: Record<string, unknown>) => {
    if (RANK[level] < RANK[options.level]) return;
    const extra = context && Object.keys(context).length > 0 ? ` ${safeJson(context)}` : "";
    write(`${now().toISOString()} ${level.toUpperCase().padEnd(5)} ${message}${extra}`);
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) => (v instanceof Error ? v.message : v));
  } catch {
    return "[unserializable context]";
  }
}

export const silentLogger: Logger = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

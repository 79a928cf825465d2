import { type Logger, type LogLevel, pinoLogger } from "@cm/log";
import pino from "pino";

export type { LogFields as Fields, Logger, LogLevel } from "@cm/log";

/**
 * JSON lines on stderr (`{level, time, name, msg, ...fields}`): readable by
 * people, parseable by a log shipper. An Error under `err` is written with its
 * stack; one under any other key as its message.
 */
export function createLogger(level: LogLevel, name = "control-plane", destination: pino.DestinationStream = pino.destination({ dest: 2, sync: true })): Logger {
  return pinoLogger({ level, base: { name }, timestamp: pino.stdTimeFunctions.isoTime }, destination);
}

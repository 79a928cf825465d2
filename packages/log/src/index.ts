// The logger both programs hand around: a message first, then fields, and child
// loggers that bind fields (a request, a node, a deployment) to every line. pino
// does the levels, the bindings and errors' serialization; each program gives it
// the destination that renders a record as its operators read it (the agent: a
// sentence per line for journald; the control plane: JSON lines).
import pino from "pino";

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";
export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
  /** A logger whose every line carries `fields` too. */
  child(fields: LogFields): Logger;
}

export interface PinoLoggerOptions {
  level: LogLevel;
  /** fields on every record (the program's name), none by default */
  base?: LogFields;
  /** pino's timestamp function: the `,"time":...` text put in each record */
  timestamp: () => string;
}

/**
 * A Logger writing pino's JSON records (`{level, time, msg, ...fields}`, level
 * as its label) to `destination`. An Error under `err` is written with its
 * stack; one under any other key (`error`) as its message: pino would write it
 * as `{}`.
 */
export function pinoLogger(options: PinoLoggerOptions, destination: pino.DestinationStream): Logger {
  return wrap(
    pino(
      {
        level: options.level,
        base: options.base ?? undefined,
        timestamp: options.timestamp,
        formatters: { level: (label) => ({ level: label }), log: errorsAsMessages },
      },
      destination,
    ),
  );
}

function wrap(p: pino.Logger): Logger {
  return {
    debug: (message, fields) => p.debug(fields ?? {}, message),
    info: (message, fields) => p.info(fields ?? {}, message),
    warn: (message, fields) => p.warn(fields ?? {}, message),
    error: (message, fields) => p.error(fields ?? {}, message),
    child: (fields) => wrap(p.child(fields)),
  };
}

function errorsAsMessages(fields: LogFields): LogFields {
  let out = fields;
  for (const [key, value] of Object.entries(fields)) {
    if (key !== "err" && value instanceof Error) {
      if (out === fields) out = { ...fields };
      out[key] = value.message;
    }
  }
  return out;
}

/**
 * `parent.child(fields)`, made when it first logs: for a child per request,
 * where most requests log nothing and pino's child cost 5% of the catalogue's
 * CPU under load. A class: closures made per request cost most of that again.
 */
export function lazyChild(parent: Logger, fields: LogFields): Logger {
  return new LazyChild(parent, fields);
}

class LazyChild implements Logger {
  private made: Logger | undefined;
  constructor(
    private readonly parent: Logger,
    private readonly fields: LogFields,
  ) {}
  private get log(): Logger {
    this.made ??= this.parent.child(this.fields);
    return this.made;
  }
  debug(message: string, fields?: LogFields) {
    this.log.debug(message, fields);
  }
  info(message: string, fields?: LogFields) {
    this.log.info(message, fields);
  }
  warn(message: string, fields?: LogFields) {
    this.log.warn(message, fields);
  }
  error(message: string, fields?: LogFields) {
    this.log.error(message, fields);
  }
  child(fields: LogFields): Logger {
    return this.log.child(fields);
  }
}

const noop = () => {};
/** Writes nothing: for tests, and for the parts a caller runs without a log. */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop, child: () => silentLogger };
